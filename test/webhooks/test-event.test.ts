// POST /v1/webhooks/{id}/test, and what the delivery log tells of each attempt
// (response_excerpt, next_attempt_at).
import { createHmac } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, type TestAccount } from '../helpers.js';
import { startHttpsServer, type RecordedRequest, type Reply } from '../https-server.js';
import { createContact, expectError, expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';
import { SseClient } from '../events/sse-client.js';
import type { AddressInfo } from 'node:net';

let t: WebhookTestApp;
beforeAll(async () => {
  t = await startWebhookTestApp();
});
afterAll(() => t.close());

const receivers: Awaited<ReturnType<typeof startHttpsServer>>[] = [];
async function receiver(first: Reply[] = [], then: Reply = { status: 200 }) {
  const queue = [...first];
  const r = await startHttpsServer(() => queue.shift() ?? then);
  receivers.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function createWebhook(acc: TestAccount, url: string, events: string[]) {
  const res = await acc.call({ method: 'POST', url: '/v1/webhooks', payload: { url, events } });
  expectStatus(res, 201);
  return res.json<{ id: string; secret: string }>();
}

async function drain(): Promise<void> {
  const d = t.dispatcher();
  try {
    await d.drain();
  } finally {
    await d.stop();
  }
}

interface LoggedAttempt {
  id: string;
  event_id: string;
  event: string;
  attempt: number;
  status_code: number | null;
  response_excerpt: string | null;
  next_attempt_at: string | null;
  created_at: string;
}
async function attemptsOf(acc: TestAccount, webhookId: string): Promise<LoggedAttempt[]> {
  const res = await acc.call({ method: 'GET', url: `/v1/webhooks/${webhookId}/deliveries` });
  expectStatus(res, 200);
  return res.json<{ data: LoggedAttempt[] }>().data;
}

const sendTest = (acc: TestAccount, id: string) =>
  acc.call({ method: 'POST', url: `/v1/webhooks/${id}/test` });

describe('POST /v1/webhooks/{id}/test', () => {
  it('sends a signed webhook.test event to that webhook only, whatever its events, and logs it', async () => {
    const rcv = await receiver();
    const other = await receiver();
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['broadcast.completed']);
    const otherHook = await createWebhook(acc, other.url('/hook'), ['contact.created']);

    const res = await sendTest(acc, wh.id);
    expectStatus(res, 202);
    const { event_id } = res.json<{ event_id: string }>();
    expect(event_id).toMatch(/^evt_/);
    await drain();

    expect(rcv.requests).toHaveLength(1);
    const req = rcv.requests[0] as RecordedRequest;
    expect(req.headers['x-service-signature']).toBe(
      createHmac('sha256', wh.secret).update(req.body).digest('hex'),
    );
    expect(req.headers['x-service-event-id']).toBe(event_id);
    const body = new StandardWebhook(wh.secret).verify(
      req.body.toString(),
      req.headers as Record<string, string>,
    );
    expect(body).toMatchObject({
      id: event_id,
      event: 'webhook.test',
      data: { webhook_id: wh.id },
    });
    expect(other.requests).toHaveLength(0);
    expect(await attemptsOf(acc, otherHook.id)).toEqual([]);
    expect(await attemptsOf(acc, wh.id)).toEqual([
      expect.objectContaining({ event_id, event: 'webhook.test', attempt: 1, status_code: 200 }),
    ]);
  });

  it('is retried like any other event, and redelivered on request', async () => {
    const rcv = await receiver([{ status: 500 }], { status: 204 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    const { event_id } = (await sendTest(acc, wh.id)).json<{ event_id: string }>();
    await drain();
    t.clock.advance(5_000);
    await drain();
    expect(rcv.requests.map((r) => r.headers['x-service-delivery-attempt'])).toEqual(['1', '2']);
    const [latest] = await attemptsOf(acc, wh.id);
    const retry = await acc.call({
      method: 'POST',
      url: `/v1/webhooks/${wh.id}/deliveries/${latest!.id}/retry`,
    });
    expectStatus(retry, 200);
    await drain();
    expect(rcv.requests).toHaveLength(3);
    expect(new Set(rcv.requests.map((r) => r.headers['webhook-id']))).toEqual(new Set([event_id]));
  });

  it('is a 409 on a disabled webhook and a 404 on an unknown one', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    expectStatus(
      await acc.call({
        method: 'PATCH',
        url: `/v1/webhooks/${wh.id}`,
        payload: { status: 'disabled' },
      }),
      200,
    );
    expectError(await sendTest(acc, wh.id), 409);
    expectError(await sendTest(acc, 'wh_doesnotexist'), 404);
    await drain();
    expect(rcv.requests).toHaveLength(0);
  });

  it('cannot be subscribed to', async () => {
    const acc = await newAccount(t);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/webhooks',
      payload: { url: 'https://example.com/hook', events: ['webhook.test'] },
    });
    expectError(res, 422, 'events.0');
  });
});

describe('the live event stream', () => {
  it('does not carry test events, and ?events= does not know them', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const rcv = await receiver();
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    const open = (query: string) =>
      SseClient.open(`http://127.0.0.1:${port}/v1/events/stream${query}`, {
        authorization: `Bearer ${acc.apiKey}`,
      });
    const s = await open('');
    try {
      await s.until(() => s.retry !== null);
      expectStatus(await sendTest(acc, wh.id), 202);
      await createContact(acc);
      await s.until(() => s.messages.length >= 1, 5_000, 'contact.created');
      expect(s.messages.map((m) => m.event)).toEqual(['contact.created']);
    } finally {
      s.close();
    }
    const bad = await open('?events=webhook.test');
    await bad.until(() => bad.ended);
    expect(bad.status).toBe(422);
  });
});

describe('the delivery log', () => {
  it("keeps at most 500 characters of the receiver's answer, without NUL or the secret", async () => {
    let secret = '';
    const rcv = await startHttpsServer(() => ({
      status: 200,
      body: `${secret}\u0000` + 'é'.repeat(2_000),
    }));
    receivers.push(rcv);
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    secret = wh.secret;
    await sendTest(acc, wh.id);
    await drain();
    const [attempt] = await attemptsOf(acc, wh.id);
    expect(attempt!.response_excerpt).not.toContain(wh.secret);
    expect(attempt!.response_excerpt).not.toContain('\u0000');
    expect(attempt!.response_excerpt).toMatch(/^\[secret\]é+$/);
    expect(attempt!.response_excerpt!.length).toBeLessThanOrEqual(500);
    expect(attempt!.response_excerpt!.length).toBeGreaterThan(450);
    const shortRcv = await receiver([], { status: 500, body: 'database is down' });
    const wh2 = await createWebhook(acc, shortRcv.url('/hook'), ['contact.created']);
    await sendTest(acc, wh2.id);
    await drain();
    expect((await attemptsOf(acc, wh2.id))[0]!.response_excerpt).toBe('database is down');
  });

  it('next_attempt_at is the retry a failure scheduled, and null when the delivery is done', async () => {
    const rcv = await receiver([{ status: 503 }], { status: 200 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    const [failed] = await attemptsOf(acc, wh.id);
    expect(failed!.status_code).toBe(503);
    expect(failed!.response_excerpt).toBeNull();
    expect(new Date(failed!.next_attempt_at!).getTime()).toBe(
      new Date(failed!.created_at).getTime() + 5_000,
    );
    t.clock.advance(5_000);
    await drain();
    const [done] = await attemptsOf(acc, wh.id);
    expect(done).toMatchObject({ attempt: 2, status_code: 200, next_attempt_at: null });

    // Given up (410 Gone): no next attempt either.
    const gone = await receiver([], { status: 410 });
    const wh2 = await createWebhook(acc, gone.url('/hook'), ['contact.created']);
    await sendTest(acc, wh2.id);
    await drain();
    expect(await attemptsOf(acc, wh2.id)).toEqual([
      expect.objectContaining({ status_code: 410, next_attempt_at: null }),
    ]);
  });
});
