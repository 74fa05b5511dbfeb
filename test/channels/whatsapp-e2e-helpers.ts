/**
 * End to end on real WhatsApp: the whole app (app.ts as the service builds it) on a real port and
 * a database of the file's own, connected through `PUT /v1/channels/whatsapp` to the fake Graph
 * API, with an HTTPS media host for the files that sends fetch. Jobs run only when a test drains
 * them, on the app's test clock.
 */
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { AppConfig } from '../../src/services.js';
import type { EventType } from '../../src/events/event-types.js';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { startFakeGraph, type FakeGraph } from '../fake-graph/server.js';
import {
  inboundWebhook,
  postSignedWebhook,
  stampWebhooksWith,
  waMessage,
} from '../fake-graph/webhooks.js';
import {
  createPrivateDatabase,
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { eventsOf } from '../inbox-helpers.js';

export const PUBLIC_URL = 'https://switchboard.e2e.example';
export const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001', 'hex');
export const PDF = Buffer.from('%PDF-1.4\n%e2e invoice\n');

export interface E2E {
  t: TestApp;
  graph: FakeGraph;
  media: Awaited<ReturnType<typeof startHttpsServer>>;
  /** Where the app listens (webhooks arrive here over HTTP, as Meta sends them). */
  url: string;
  /** The file's own database, and the key its connections' secrets are sealed under. */
  databaseUrl: string;
  secretsKey: Buffer;
  close(): Promise<void>;
}

export async function startE2E(config: Partial<AppConfig> = {}): Promise<E2E> {
  const db = await createPrivateDatabase();
  const graph = await startFakeGraph();
  const media = await startHttpsServer((req) => {
    switch (req.url) {
      case '/files/photo.png':
        return { status: 200, headers: { 'content-type': 'image/png' }, body: PNG };
      case '/files/invoice%2042.pdf':
        return { status: 200, headers: { 'content-type': 'application/pdf' }, body: PDF };
      default:
        return { status: 404, headers: { 'content-type': 'text/plain' }, body: 'not found' };
    }
  });
  const secretsKey = randomBytes(32);
  const t = await startTestApp({
    databaseUrl: db.url,
    config: {
      metaGraphUrl: graph.url,
      metaGraphVersion: 'v23.0',
      publicUrl: PUBLIC_URL,
      secretsKey,
      ...config,
    },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = t.app.server.address() as { port: number };
  // Meta's webhooks carry the time the person wrote, on the app's clock.
  stampWebhooksWith(t.clock);
  return {
    t,
    graph,
    media,
    url: `http://127.0.0.1:${port}`,
    databaseUrl: db.url,
    secretsKey,
    close: async () => {
      await t.close();
      await media.close();
      await graph.stop();
      await db.drop();
    },
  };
}

let numericIds = Math.floor(Math.random() * 1e9);
const numericId = () => String(100_000_000_000_000 + numericIds++);

export interface Connected {
  acc: TestAccount;
  /** The Connection the PUT answered. */
  connection: {
    id: string;
    webhook_url: string;
    verify_token: string;
    settings: Record<string, unknown>;
  };
  phoneNumberId: string;
  businessAccountId: string;
  accessToken: string;
  appSecret: string;
  /** The webhook route on the listening app (webhook_url names PUBLIC_URL). */
  webhookUrl: string;
  /** `POST {phone_number_id}/messages` at the fake. */
  sendMatcher: { method: string; resource: string };
}

/** A fresh account whose WhatsApp is connected to its own phone number at the fake, by the API. */
export async function connectedAccount(e: E2E): Promise<Connected> {
  const acc = await newAccount(e.t);
  const phoneNumberId = numericId();
  const businessAccountId = numericId();
  const accessToken = `EAAG${randomBytes(24).toString('hex')}`;
  const appSecret = randomBytes(16).toString('hex');
  e.graph.addPhoneNumber({
    id: phoneNumberId,
    token: accessToken,
    display_phone_number: '+1 555-010-4477',
    verified_name: 'E2E Shop',
    business_account_id: businessAccountId,
  });
  const res = await acc.call({
    method: 'PUT',
    url: '/v1/channels/whatsapp',
    payload: {
      provider: 'whatsapp_cloud',
      phone_number_id: phoneNumberId,
      business_account_id: businessAccountId,
      access_token: accessToken,
      app_secret: appSecret,
    },
  });
  expect(res.statusCode, res.body).toBe(200);
  const connection = res.json();
  expect(connection).toMatchObject({
    channel: 'whatsapp',
    provider: 'whatsapp_cloud',
    status: 'active',
    webhook_url: `${PUBLIC_URL}/channels/${connection.id}/webhook`,
  });
  return {
    acc,
    connection,
    phoneNumberId,
    businessAccountId,
    accessToken,
    appSecret,
    webhookUrl: `${e.url}/channels/${connection.id}/webhook`,
    sendMatcher: { method: 'POST', resource: `${phoneNumberId}/messages` },
  };
}

export const business = (c: Connected) => ({
  phoneNumberId: c.phoneNumberId,
  businessAccountId: c.businessAccountId,
});

/**
 * Waits for the webhooks the app is processing right after storing them, then runs the
 * account's due jobs (every kind the service has) until none is left.
 */
export async function drain(e: E2E, accountId: string): Promise<number> {
  await e.t.services.inbound.settled();
  return new JobRunner({
    db: e.t.db,
    clock: e.t.clock,
    log: e.t.app.log,
    handlers: e.t.services.jobHandlers,
    accountId,
  }).drain();
}

/** Posts a webhook signed with the connection's app secret and expects Meta's 200. */
export async function deliver(c: Connected, payload: Record<string, unknown>): Promise<void> {
  const res = await postSignedWebhook(c.webhookUrl, payload, c.appSecret);
  expect(res.status, res.body).toBe(200);
}

export async function createContact(
  acc: TestAccount,
  phone = randomPhone(),
): Promise<{ id: string; phone: string }> {
  const res = await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

/** `PUT /v1/channels/whatsapp` again for the connection, with some of its credentials changed. */
export function reconnect(
  c: Connected,
  changes: { access_token?: string; app_secret?: string } = {},
): Promise<LightMyRequestResponse> {
  return c.acc.call({
    method: 'PUT',
    url: '/v1/channels/whatsapp',
    payload: {
      provider: 'whatsapp_cloud',
      phone_number_id: c.phoneNumberId,
      business_account_id: c.businessAccountId,
      access_token: c.accessToken,
      app_secret: c.appSecret,
      ...changes,
    },
  });
}

/**
 * A text sent (accepted by the fake Graph) to a contact who wrote first: the contact, the
 * message's id and wamid, and the recipient's wa_id.
 */
export async function sentText(e: E2E, c: Connected) {
  const contact = await createContact(c.acc);
  await contactWrites(e, c, contact);
  const res = await send(c, { contact_id: contact.id, type: 'text', content: 'on its way' });
  expect(res.json()).toMatchObject({ status: 'sent' });
  const row = await messageRow(e, c.acc.accountId, res.json().id);
  return { contact, id: row.id, wamid: row.provider_message_id!, to: contact.phone.slice(1) };
}

/** The contact writes on WhatsApp (a signed webhook, processed): the 24-hour window opens. */
export async function contactWrites(
  e: E2E,
  c: Connected,
  contact: { phone: string },
  text = 'hello?',
): Promise<void> {
  await deliver(
    c,
    inboundWebhook(
      business(c),
      { waId: contact.phone.slice(1), name: 'Ada' },
      waMessage.text(contact.phone.slice(1), text),
    ),
  );
  await drain(e, c.acc.accountId);
}

/** An approved template of Meta's, imported with `POST /v1/templates/sync`. */
export async function approvedTemplate(
  e: E2E,
  c: Connected,
  body: string,
  language = 'en_US',
): Promise<{ name: string; language: string }> {
  const name = `order_${randomBytes(4).toString('hex')}`;
  e.graph.addTemplate({
    business_account_id: c.businessAccountId,
    name,
    language,
    status: 'APPROVED',
    body,
  });
  const res = await c.acc.call({ method: 'POST', url: '/v1/templates/sync' });
  expect(res.statusCode, res.body).toBe(200);
  return { name, language };
}

export function send(
  c: Connected,
  payload: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return c.acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { channel: 'whatsapp', ...payload },
    headers,
  });
}

export async function messageRow(e: E2E, accountId: string, id: string) {
  return e.t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

export async function outboundRows(e: E2E, accountId: string) {
  return e.t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('direction', '=', 'outbound')
    .orderBy('created_at')
    .execute();
}

export async function jobsOf(e: E2E, accountId: string, kind?: string) {
  let q = e.t.db
    .selectFrom('jobs')
    .select(['id', 'kind', 'payload', 'run_at', 'attempts', 'locked_until', 'dead_at'])
    .where('account_id', '=', accountId);
  if (kind) q = q.where('kind', '=', kind as never);
  return q.orderBy('run_at').execute();
}

export function events(e: E2E, accountId: string, type?: EventType) {
  return eventsOf(e.t.db, accountId, type);
}

/** The exact JSON bytes DESIGN §4 gives for a WhatsApp send. */
export function whatsappBody(to: string, type: string, payload: unknown): string {
  return JSON.stringify({
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to: to.replace(/^\+/, ''),
    type,
    [type]: payload,
  });
}
