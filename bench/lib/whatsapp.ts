import { randomBytes } from 'node:crypto';
import type { FakeGraph } from './graph.js';
import { expectJson, requestJson, stringField } from './http.js';
import type { ServiceHandle, BenchAccount } from './service.js';
import type { BenchContext } from './suite.js';

/** A template every WhatsApp suite sends: two parameters, approved before it is used. */
export const BENCH_TEMPLATE = {
  name: 'bench_order_shipped',
  language: 'en',
  category: 'utility',
  body: 'Hello {{1}}, your order {{2}} has shipped and will arrive on Thursday.',
} as const;

/** What a suite knows of a connected WhatsApp channel (never printed: the secrets are in it). */
export interface WhatsAppChannel {
  connectionId: string;
  phoneNumberId: string;
  businessAccountId: string;
  displayPhoneNumber: string;
  appSecret: string;
  /** `/channels/{id}/webhook`, the path of the connection's webhook_url. */
  webhookPath: string;
}

let nextPhone = 0;

export function requireGraph(ctx: BenchContext): FakeGraph {
  if (!ctx.graph) throw new Error('this suite needs the fake Graph API (Suite.fakeGraph)');
  return ctx.graph;
}

/** False for a service built before channel connections existed (BENCH_SERVICE_ROOT). */
export async function hasChannelConnections(
  service: ServiceHandle,
  account: BenchAccount,
): Promise<boolean> {
  const res = await requestJson(`${service.url}/v1/channels`, { token: account.apiKey });
  return res.status === 200;
}

/**
 * Creates BENCH_TEMPLATE and approves it through the sandbox's review. On an account whose
 * whatsapp channel is connected templates are Meta's, so this comes before `connectWhatsApp`.
 */
export async function approvedTemplate(
  service: ServiceHandle,
  account: BenchAccount,
): Promise<string> {
  const created = await expectJson(201, `${service.url}/v1/templates`, {
    method: 'POST',
    token: account.apiKey,
    body: BENCH_TEMPLATE,
  });
  const id = stringField(created, 'id');
  const reviewed = await expectJson(200, `${service.url}/v1/sandbox/templates/${id}/review`, {
    method: 'POST',
    token: account.apiKey,
    body: { status: 'approved' },
  });
  if (reviewed.status !== 'approved') {
    throw new Error(`template ${id} is ${JSON.stringify(reviewed.status)} after the review`);
  }
  return id;
}

/**
 * Registers a phone number with the fake Graph API and connects the account's whatsapp channel
 * to it with `PUT /v1/channels/whatsapp` (the service checks the credentials with Graph first).
 */
export async function connectWhatsApp(
  service: ServiceHandle,
  graph: FakeGraph,
  account: BenchAccount,
): Promise<WhatsAppChannel> {
  const n = nextPhone++;
  const phoneNumberId = String(106_540_352_242_900 + n);
  const businessAccountId = String(102_290_129_340_300 + n);
  const displayPhoneNumber = `1555078${String(3881 + n).padStart(4, '0')}`;
  const accessToken = `EAAbench${randomBytes(24).toString('hex')}`;
  const appSecret = randomBytes(16).toString('hex');
  await graph.addPhoneNumber(phoneNumberId, {
    token: accessToken,
    business_account_id: businessAccountId,
    display_phone_number: displayPhoneNumber,
    verified_name: 'Switchboard Bench',
  });
  const connection = await expectJson(200, `${service.url}/v1/channels/whatsapp`, {
    method: 'PUT',
    token: account.apiKey,
    body: {
      provider: 'whatsapp_cloud',
      phone_number_id: phoneNumberId,
      business_account_id: businessAccountId,
      access_token: accessToken,
      app_secret: appSecret,
    },
  });
  if (connection.status !== 'active' || connection.provider !== 'whatsapp_cloud') {
    throw new Error(
      `the whatsapp channel is ${JSON.stringify(connection.status)} on ${JSON.stringify(connection.provider)} after connecting`,
    );
  }
  const webhookUrl = stringField(connection, 'webhook_url');
  return {
    connectionId: stringField(connection, 'id'),
    phoneNumberId,
    businessAccountId,
    displayPhoneNumber,
    appSecret,
    webhookPath: new URL(webhookUrl).pathname,
  };
}

/** What the suites read of a broadcast. */
export interface BroadcastBody extends Record<string, unknown> {
  status?: unknown;
  stats?: { sent?: unknown; failed?: unknown };
}

/** A broadcast's sent and failed counts (NaN where the answer has none). */
export function broadcastStats(b: BroadcastBody): { sent: number; failed: number } {
  return { sent: Number(b.stats?.sent ?? NaN), failed: Number(b.stats?.failed ?? NaN) };
}

/**
 * `POST /v1/broadcasts` of BENCH_TEMPLATE on whatsapp to the contacts holding `tag`, sent now;
 * the created broadcast as the API answered it (201).
 */
export async function createTemplateBroadcast(
  baseUrl: string,
  apiKey: string,
  opts: { name: string; tag: string; code: string },
): Promise<BroadcastBody> {
  return expectJson(201, `${baseUrl}/v1/broadcasts`, {
    method: 'POST',
    token: apiKey,
    body: {
      name: opts.name,
      channel: 'whatsapp',
      audience: { tags: [opts.tag] },
      message: {
        type: 'template',
        template_name: BENCH_TEMPLATE.name,
        template_params: ['there', opts.code],
      },
    },
  });
}
