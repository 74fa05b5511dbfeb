import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, newAccount, startTestApp, type TestApp } from '../helpers.js';
import { expectStatus } from '../inbox-helpers.js';
import { signedInUser } from '../users/session-helpers.js';
import { SseClient } from './sse-client.js';

// Credentials are checked again every 100 ms here (30 s in service).
let t: TestApp;
let base: string;
beforeAll(async () => {
  t = await startTestApp({ eventStreams: { credentialCheckMs: 100 } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`;
});
afterAll(() => t.close());

async function endOf(stream: SseClient): Promise<unknown> {
  await stream.until(() => stream.ended, 5_000, 'the stream to end');
  const last = stream.messages.at(-1);
  expect(last?.event).toBe('end');
  return JSON.parse(last!.data);
}

describe('a stream ends honestly', () => {
  it('with event: end {reason: "revoked"} when its API key is revoked; other keys\' streams go on', async () => {
    const acc = await newAccount(t);
    const other = await t.services.accounts.createApiKey(acc.accountId, 'other');
    const revoked = await SseClient.open(`${base}/v1/events/stream`, {
      authorization: `Bearer ${acc.apiKey}`,
    });
    const kept = await SseClient.open(`${base}/v1/events/stream`, {
      authorization: `Bearer ${other.api_key}`,
    });
    try {
      expect(revoked.status).toBe(200);
      await t.services.accounts.revokeApiKey(acc.keyId);
      expect(await endOf(revoked)).toEqual({ reason: 'revoked' });
      await new Promise((r) => setTimeout(r, 300));
      expect(kept.ended).toBe(false);
    } finally {
      revoked.close();
      kept.close();
    }
  });

  it('with reason "plan" when the account moves to a plan without API access', async () => {
    const acc = await newAccount(t);
    const stream = await SseClient.open(`${base}/v1/events/stream`, {
      authorization: `Bearer ${acc.apiKey}`,
    });
    try {
      const moved = await t.app.inject({
        method: 'PATCH',
        url: `/admin/accounts/${acc.accountId}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        payload: { plan: 'starter' },
      });
      expectStatus(moved, 200);
      expect(await endOf(stream)).toEqual({ reason: 'plan' });
    } finally {
      stream.close();
    }
  });

  it('with reason "session_ended" when its session ends; a Starter account\'s session stream is kept', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc);
    const stream = await SseClient.open(`${base}/v1/events/stream`, {
      cookie: `sb_session=${user.token}`,
    });
    try {
      expect(stream.status).toBe(200);
      await t.app.inject({
        method: 'PATCH',
        url: `/admin/accounts/${acc.accountId}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        payload: { plan: 'starter' },
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(stream.ended).toBe(false);
      expectStatus(await user.call({ method: 'DELETE', url: '/v1/session' }), 200);
      expect(await endOf(stream)).toEqual({ reason: 'session_ended' });
    } finally {
      stream.close();
    }
  });
});
