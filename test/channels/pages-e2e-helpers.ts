/**
 * End to end on Messenger and Instagram: the app as the service builds it (see
 * whatsapp-e2e-helpers.ts), a Page (and the Instagram professional account linked to it)
 * registered at the fake Graph API and connected by `PUT /v1/channels/{channel}`.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { TestAccount } from '../helpers.js';
import { postSignedWebhook } from '../fake-graph/webhooks.js';
import { PUBLIC_URL, drain, type E2E } from './whatsapp-e2e-helpers.js';

let numericIds = Math.floor(Math.random() * 1e9);
const numericId = () => String(200_000_000_000_000 + numericIds++);

export interface PageConnected {
  acc: TestAccount;
  channel: 'messenger' | 'instagram';
  connection: {
    id: string;
    webhook_url: string;
    verify_token: string;
    settings: Record<string, unknown>;
  };
  pageId: string;
  /** Instagram only: the professional account linked to the Page. */
  instagramAccountId: string | null;
  /** What the connection's webhooks carry as `entry[].id` and as the recipient of a person's events. */
  entryId: string;
  pageToken: string;
  appSecret: string;
  /** The webhook route on the listening app. */
  webhookUrl: string;
  /** `POST {page_id}/messages` at the fake: the Send API, for both channels. */
  sendMatcher: { method: string; resource: string };
}

/** Registers a Page at the fake and connects it to `acc` on `channel` through the API. */
export async function connectPageByApi(
  e: E2E,
  acc: TestAccount,
  channel: 'messenger' | 'instagram',
): Promise<PageConnected> {
  const pageId = numericId();
  const instagramAccountId = channel === 'instagram' ? `1784${numericId()}` : null;
  const pageToken = `EAAP${randomBytes(24).toString('hex')}`;
  const appSecret = randomBytes(16).toString('hex');
  e.graph.addPage({
    id: pageId,
    token: pageToken,
    name: 'E2E Shop',
    ...(instagramAccountId ? { instagram_account_id: instagramAccountId } : {}),
  });
  const res = await acc.call({
    method: 'PUT',
    url: `/v1/channels/${channel}`,
    payload: {
      provider: channel,
      page_id: pageId,
      ...(instagramAccountId ? { instagram_account_id: instagramAccountId } : {}),
      page_access_token: pageToken,
      app_secret: appSecret,
    },
  });
  expect(res.statusCode, res.body).toBe(200);
  const connection = res.json();
  expect(connection).toMatchObject({
    channel,
    provider: channel,
    status: 'active',
    error: null,
    webhook_url: `${PUBLIC_URL}/channels/${connection.id}/webhook`,
    verify_token: expect.any(String),
    settings: {
      page_id: pageId,
      page_name: 'E2E Shop',
      ...(instagramAccountId ? { instagram_account_id: instagramAccountId } : {}),
    },
  });
  // Write-only secrets.
  expect(res.body).not.toContain(pageToken);
  expect(res.body).not.toContain(appSecret);
  return {
    acc,
    channel,
    connection,
    pageId,
    instagramAccountId,
    entryId: instagramAccountId ?? pageId,
    pageToken,
    appSecret,
    webhookUrl: `${e.url}/channels/${connection.id}/webhook`,
    sendMatcher: { method: 'POST', resource: `${pageId}/messages` },
  };
}

/** Posts a webhook signed with the connection's app secret, expects Meta's 200. */
export async function post(c: PageConnected, payload: Record<string, unknown>): Promise<void> {
  const res = await postSignedWebhook(c.webhookUrl, payload, c.appSecret);
  expect(res.status, res.body).toBe(200);
}

/** Posts a webhook and runs the account's jobs. */
export async function deliverAndDrain(
  e: E2E,
  c: PageConnected,
  payload: Record<string, unknown>,
): Promise<void> {
  await post(c, payload);
  await drain(e, c.acc.accountId);
}

/** The contact an inbound message (by its provider id) was recorded for, and its channel. */
export async function recipientOf(e: E2E, accountId: string, providerMessageId: string) {
  return e.t.db
    .selectFrom('messages')
    .innerJoin('conversations', (j) =>
      j
        .onRef('conversations.id', '=', 'messages.conversation_id')
        .onRef('conversations.account_id', '=', 'messages.account_id'),
    )
    .select(['messages.id', 'conversations.contact_id', 'conversations.channel'])
    .where('messages.account_id', '=', accountId)
    .where('messages.provider_message_id', '=', providerMessageId)
    .executeTakeFirstOrThrow();
}

/** The account's conversations: contact and channel. */
export async function conversationsOf(e: E2E, accountId: string) {
  return e.t.db
    .selectFrom('conversations')
    .select(['id', 'contact_id', 'channel'])
    .where('account_id', '=', accountId)
    .execute();
}

/** The exact Send API body DESIGN §4 gives for Messenger and Instagram. */
export function sendApiBody(recipient: string, message: unknown): string {
  return JSON.stringify({ recipient: { id: recipient }, messaging_type: 'RESPONSE', message });
}
