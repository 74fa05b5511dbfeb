import { createHmac } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, randomPhone, type TestAccount } from '../helpers.js';
import { startHttpsServer, type RecordedRequest, type Reply } from '../https-server.js';
import { createContact, createUser, expectError, expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';

let t: WebhookTestApp;
beforeAll(async () => {
  t = await startWebhookTestApp();
});
afterAll(() => t.close());

type Receiver = Awaited<ReturnType<typeof startHttpsServer>>;
const receivers: Receiver[] = [];

/** A receiver answering `reply` (changeable between requests) or the next queued answer. */
async function receiver(first: Reply[] = [], then: Reply = { status: 200 }) {
  const queue = [...first];
  const r = await startHttpsServer(() => queue.shift() ?? then);
  receivers.push(r);
  return r;
}

afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  // What a test left queued must not reach a later test's receiver (ports get reused).
  await t.db
    .updateTable('webhook_deliveries')
    .set({ state: 'failed', locked_until: null })
    .where('state', '=', 'pending')
    .execute();
});

async function createWebhook(acc: TestAccount, url: string, events: string[]) {
  const res = await acc.call({ method: 'POST', url: '/v1/webhooks', payload: { url, events } });
  expectStatus(res, 201);
  return res.json<{ id: string; secret: string; url: string; events: string[]; status: string }>();
}

/** Delivers everything due now with a fresh dispatcher (random 0.5: no jitter). */
async function drain(): Promise<number> {
  const d = t.dispatcher();
  try {
    return await d.drain();
  } finally {
    await d.stop();
  }
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const parse = (req: RecordedRequest) =>
  JSON.parse(req.body.toString()) as {
    id: string;
    event: string;
    timestamp: string;
    data: unknown;
  };
const header = (req: RecordedRequest, name: string) => req.headers[name] as string;

async function attemptsOf(acc: TestAccount, webhookId: string) {
  const res = await acc.call({ method: 'GET', url: `/v1/webhooks/${webhookId}/deliveries` });
  expectStatus(res, 200);
  return res.json<{
    total: number;
    data: {
      id: string;
      event_id: string;
      event: string;
      attempt: number;
      status_code: number | null;
      error: string | null;
      duration_ms: number;
      created_at: string;
    }[];
  }>();
}

async function deliveryRow(acc: TestAccount, webhookId: string) {
  return t.db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('account_id', '=', acc.accountId)
    .where('webhook_id', '=', webhookId)
    .executeTakeFirstOrThrow();
}

describe('events', () => {
  it('every event type reaches a subscribed webhook with data equal to the API resource, and unsubscribed events are not sent', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    await createWebhook(acc, rcv.url('/all'), [
      'contact.created',
      'message.received',
      'message.created',
      'message.delivered',
      'message.read',
      'conversation.assigned',
      'conversation.resolved',
      'broadcast.completed',
    ]);
    await createWebhook(acc, rcv.url('/read-only'), ['message.read']);

    const contact = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), name: 'Ada' },
    });
    expectStatus(contact, 201);
    const inbound = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: {
        channel: 'webchat',
        contact_id: contact.json().id,
        type: 'text',
        content: 'hello',
      },
    });
    expectStatus(inbound, 201);
    const sent = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: {
        contact_id: contact.json().id,
        channel: 'webchat',
        type: 'text',
        content: 'hi Ada',
      },
    });
    expectStatus(sent, 201);
    const delivered = await acc.call({
      method: 'POST',
      url: `/v1/sandbox/messages/${sent.json().id}/status`,
      payload: { status: 'delivered' },
    });
    expectStatus(delivered, 200);
    const read = await acc.call({
      method: 'POST',
      url: `/v1/sandbox/messages/${sent.json().id}/status`,
      payload: { status: 'read' },
    });
    expectStatus(read, 200);
    const user = await createUser(acc, 'Grace');
    const assigned = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${sent.json().conversation_id}/assign`,
      payload: { user_id: user.id },
    });
    expectStatus(assigned, 200);
    const resolved = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${sent.json().conversation_id}/resolve`,
    });
    expectStatus(resolved, 200);

    expect(await drain()).toBe(8);

    const all = rcv.requests.filter((r) => r.url === '/all').map(parse);
    const byEvent = new Map(all.map((e) => [e.event, e]));
    expect(all).toHaveLength(7);
    // Changes made through the API (here with an API key) carry `actor: null`.
    expect(byEvent.get('contact.created')?.data).toEqual({ ...contact.json(), actor: null });
    expect(byEvent.get('message.received')?.data).toEqual(inbound.json());
    // As stored, before the provider answered.
    expect(byEvent.get('message.created')?.data).toEqual({
      ...sent.json(),
      status: 'queued',
      actor: null,
    });
    expect(byEvent.get('message.delivered')?.data).toEqual(delivered.json());
    expect(byEvent.get('message.read')?.data).toEqual(read.json());
    expect(byEvent.get('conversation.assigned')?.data).toEqual({ ...assigned.json(), actor: null });
    expect(byEvent.get('conversation.resolved')?.data).toEqual({ ...resolved.json(), actor: null });
    expect((byEvent.get('message.delivered')?.data as { status: string }).status).toBe('delivered');
    expect((byEvent.get('conversation.resolved')?.data as { status: string }).status).toBe(
      'resolved',
    );

    const readOnly = rcv.requests.filter((r) => r.url === '/read-only').map(parse);
    expect(readOnly.map((e) => e.event)).toEqual(['message.read']);
    expect(readOnly[0]!.data).toEqual(read.json());
    expect(readOnly[0]!.id).toBe(byEvent.get('message.read')!.id);
  });

  it('the envelope has event, an ISO 8601 timestamp of the event and data', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    const before = t.clock.now();
    const contact = await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    const body = parse(rcv.requests[0]!);
    expect(body.event).toBe('contact.created');
    expect(body.data).toMatchObject({ id: contact.id, phone: contact.phone });
    expect(body.timestamp).toMatch(
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
    );
    expect(new Date(body.timestamp).getTime()).toBe(before.getTime());
    expect(Object.keys(body)).toEqual(expect.arrayContaining(['event', 'timestamp', 'data']));
  });

  it('a webhook created after an event does not receive it', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    await createContact(acc);
    const wh = await createWebhook(acc, rcv.url('/late'), ['contact.created']);
    await drain();
    expect(rcv.requests).toHaveLength(0);
    expect((await attemptsOf(acc, wh.id)).total).toBe(0);
    // The next one does.
    const next = await createContact(acc);
    await drain();
    expect(rcv.requests.map((r) => (parse(r).data as { id: string }).id)).toEqual([next.id]);
  });
});

describe('signing and retries', () => {
  it('headers: content type, X-Service-Signature over the raw body, event id, attempt 1 then 2, Standard Webhooks; a 500 is retried with the same id and bytes after 5 s', async () => {
    const rcv = await receiver([{ status: 500, body: 'boom' }], { status: 200 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    const event = await t.db
      .selectFrom('events')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .executeTakeFirstOrThrow();

    await drain();
    expect(rcv.requests).toHaveLength(1);
    // The schedule: 5 s (±20 %, none with random 0.5). Not a millisecond early.
    t.clock.advance(4_999);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    t.clock.advance(1);
    await drain();
    expect(rcv.requests).toHaveLength(2);

    const [first, second] = rcv.requests as [RecordedRequest, RecordedRequest];
    for (const req of [first, second]) {
      expect(req.method).toBe('POST');
      expect(header(req, 'content-type')).toMatch(/^application\/json\b/);
      expect(header(req, 'x-service-signature')).toBe(
        createHmac('sha256', wh.secret).update(req.body).digest('hex'),
      );
      expect(header(req, 'x-service-event-id')).toBe(event.id);
      expect(header(req, 'webhook-id')).toBe(event.id);
      const verified = new StandardWebhook(wh.secret).verify(
        req.body.toString(),
        req.headers as Record<string, string>,
      );
      expect(verified).toMatchObject({ event: 'contact.created' });
    }
    expect(header(first, 'x-service-delivery-attempt')).toBe('1');
    expect(header(second, 'x-service-delivery-attempt')).toBe('2');
    expect(second.body.equals(first.body)).toBe(true);
    // A tampered body fails both checks.
    const tampered = Buffer.from(
      first.body.toString().replace('contact.created', 'contact.createe'),
    );
    expect(createHmac('sha256', wh.secret).update(tampered).digest('hex')).not.toBe(
      header(first, 'x-service-signature'),
    );
    expect(() =>
      new StandardWebhook(wh.secret).verify(
        tampered.toString(),
        first.headers as Record<string, string>,
      ),
    ).toThrow();

    const log = await attemptsOf(acc, wh.id);
    expect(log.total).toBe(2);
    expect(log.data.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      [2, 200, null],
      [1, 500, expect.stringContaining('500')],
    ]);
    for (const a of log.data)
      expect(a).toMatchObject({
        event_id: event.id,
        event: 'contact.created',
        id: expect.stringMatching(/^dlv_/),
      });
    expect(new Date(log.data[0]!.created_at).getTime()).toBeGreaterThan(
      new Date(log.data[1]!.created_at).getTime(),
    );
    expect((await deliveryRow(acc, wh.id)).state).toBe('delivered');
    // Delivered: nothing more, ever.
    t.clock.advance(86_400_000);
    await drain();
    expect(rcv.requests).toHaveLength(2);
  });

  it("a receiver's Retry-After is honoured", async () => {
    const rcv = await receiver([{ status: 503, headers: { 'retry-after': '120' } }], {
      status: 204,
    });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    t.clock.advance(119_999);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    t.clock.advance(1);
    await drain();
    expect(rcv.requests).toHaveLength(2);
    expect(header(rcv.requests[1]!, 'x-service-delivery-attempt')).toBe('2');
    expect((await attemptsOf(acc, wh.id)).data.map((a) => a.status_code)).toEqual([204, 503]);
  });

  it('after the last scheduled retry the delivery is given up: 12 attempts on 5s,30s,2m,10m,30m,1h,3h,6h,12h,24h,24h', async () => {
    const rcv = await receiver([], { status: 500 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    const schedule = [
      5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000,
      86_400_000, 86_400_000,
    ];
    for (const [i, delay] of schedule.entries()) {
      t.clock.advance(delay - 1);
      await drain();
      expect(rcv.requests, `retry ${i + 1} came early`).toHaveLength(i + 1);
      t.clock.advance(1);
      await drain();
      expect(rcv.requests, `retry ${i + 1} did not come`).toHaveLength(i + 2);
    }
    expect(rcv.requests.map((r) => header(r, 'x-service-delivery-attempt'))).toEqual(
      Array.from({ length: 12 }, (_, i) => String(i + 1)),
    );
    expect(new Set(rcv.requests.map((r) => header(r, 'x-service-event-id'))).size).toBe(1);
    // Given up: nothing more, however long we wait.
    t.clock.advance(7 * 86_400_000);
    await drain();
    expect(rcv.requests).toHaveLength(12);
    expect((await deliveryRow(acc, wh.id)).state).toBe('failed');
    const log = await attemptsOf(acc, wh.id);
    expect(log.total).toBe(12);
    expect(log.data.map((a) => a.attempt)).toEqual(Array.from({ length: 12 }, (_, i) => 12 - i));
  });

  it('a redirect is not followed and counts as a failure', async () => {
    const rcv = await receiver([], { status: 301, headers: { location: '/elsewhere' } });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests.map((r) => r.url)).toEqual(['/hook']);
    const log = await attemptsOf(acc, wh.id);
    expect(log.data).toHaveLength(1);
    expect(log.data[0]).toMatchObject({ attempt: 1, status_code: 301, error: expect.any(String) });
    const row = await deliveryRow(acc, wh.id);
    expect(row.state).toBe('pending');
    t.clock.advance(5_000);
    await drain();
    expect(rcv.requests.map((r) => r.url)).toEqual(['/hook', '/hook']);
  });

  it('410 Gone disables the webhook; later events are not delivered; PATCH status active re-enables it', async () => {
    const rcv = await receiver([{ status: 410 }], { status: 200 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    const got = await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` });
    expect(got.json().status).toBe('disabled');
    expect((await acc.call({ method: 'GET', url: '/v1/webhooks' })).json().data[0].status).toBe(
      'disabled',
    );
    expect((await attemptsOf(acc, wh.id)).data[0]).toMatchObject({ status_code: 410 });

    await createContact(acc);
    t.clock.advance(3_600_000);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    // A disabled webhook's delivery cannot be retried by hand either.
    const attemptId = (await attemptsOf(acc, wh.id)).data[0]!.id;
    expectError(
      await acc.call({
        method: 'POST',
        url: `/v1/webhooks/${wh.id}/deliveries/${attemptId}/retry`,
      }),
      409,
    );

    const on = await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${wh.id}`,
      payload: { status: 'active' },
    });
    expectStatus(on, 200);
    expect(on.json().status).toBe('active');
    const third = await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(2);
    expect((parse(rcv.requests[1]!).data as { id: string }).id).toBe(third.id);
  });

  it('a webhook whose every delivery has failed for 5 days is disabled; PATCH status active re-enables it', async () => {
    let reply: Reply = { status: 500 };
    const rcv = await startHttpsServer(() => reply);
    receivers.push(rcv);
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    const statusOf = async () =>
      (await acc.call({ method: 'GET', url: '/v1/webhooks' })).json().data[0].status as string;
    const row = () =>
      t.db
        .selectFrom('webhooks')
        .select(['status', 'disabled_reason', 'failing_since'])
        .where('account_id', '=', acc.accountId)
        .where('id', '=', wh.id)
        .executeTakeFirstOrThrow();

    await createContact(acc);
    await drain();
    const firstFailure = t.clock.now();
    expect(await row()).toEqual({
      status: 'active',
      disabled_reason: null,
      failing_since: firstFailure,
    });

    // Just short of 5 days of failures (retries and new events alike): still active.
    t.clock.advance(5 * DAY - HOUR);
    await createContact(acc);
    await drain();
    expect(await statusOf()).toBe('active');
    expect((await row()).failing_since).toEqual(firstFailure);

    // The first failure past 5 days disables it, and gives up what was queued.
    t.clock.advance(2 * HOUR);
    await createContact(acc);
    await drain();
    expect(await statusOf()).toBe('disabled');
    expect((await row()).disabled_reason).toBe(
      `every delivery has failed since ${firstFailure.toISOString()}`,
    );
    const pending = await t.db
      .selectFrom('webhook_deliveries')
      .select('event_id')
      .where('account_id', '=', acc.accountId)
      .where('state', '=', 'pending')
      .execute();
    expect(pending).toEqual([]);
    const sent = rcv.requests.length;
    await createContact(acc);
    t.clock.advance(DAY);
    await drain();
    expect(rcv.requests).toHaveLength(sent);

    reply = { status: 200 };
    const on = await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${wh.id}`,
      payload: { status: 'active' },
    });
    expectStatus(on, 200);
    expect(on.json().status).toBe('active');
    expect(await row()).toEqual({ status: 'active', disabled_reason: null, failing_since: null });
    const next = await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(sent + 1);
    expect((parse(rcv.requests.at(-1)!).data as { id: string }).id).toBe(next.id);
    expect(await statusOf()).toBe('active');
  });

  it('any successful delivery restarts the 5 days: a webhook failing on and off stays active', async () => {
    let reply: Reply = { status: 503 };
    const rcv = await startHttpsServer(() => reply);
    receivers.push(rcv);
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    const failingSince = async () =>
      (
        await t.db
          .selectFrom('webhooks')
          .select(['status', 'failing_since'])
          .where('account_id', '=', acc.accountId)
          .where('id', '=', wh.id)
          .executeTakeFirstOrThrow()
      ).failing_since;

    await createContact(acc);
    await drain();
    expect(await failingSince()).toEqual(t.clock.now());

    t.clock.advance(3 * DAY);
    reply = { status: 200 };
    await createContact(acc);
    await drain();
    expect(await failingSince()).toBeNull();

    t.clock.advance(3 * DAY);
    reply = { status: 503 };
    await createContact(acc);
    await drain();
    const restarted = t.clock.now();
    expect(await failingSince()).toEqual(restarted);
    t.clock.advance(4 * DAY);
    await createContact(acc);
    await drain();
    expect((await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` })).json().status).toBe(
      'active',
    );
    expect(await failingSince()).toEqual(restarted);
  });

  it('deleting a webhook stops its queued retries', async () => {
    const rcv = await receiver([], { status: 500 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/webhooks/${wh.id}` }), 200);
    for (const step of [5_000, 30_000, 120_000, 86_400_000]) {
      t.clock.advance(step);
      await drain();
    }
    expect(rcv.requests).toHaveLength(1);
  });

  it('deleting a webhook while a delivery is in flight: the failure is not retried', async () => {
    const rcv = await receiver([], { status: 500, delayMs: 500 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    const d = t.dispatcher();
    const draining = d.drain();
    await expect.poll(() => rcv.requests.length).toBe(1);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/webhooks/${wh.id}` }), 200);
    await draining;
    await d.stop();
    t.clock.advance(3_600_000);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    // Nothing is left queued for it.
    expect(
      await t.db
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('account_id', '=', acc.accountId)
        .where('state', '=', 'pending')
        .execute(),
    ).toEqual([]);
  });

  it('POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry sends the event again with the same event id', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    const [attempt] = (await attemptsOf(acc, wh.id)).data;
    const res = await acc.call({
      method: 'POST',
      url: `/v1/webhooks/${wh.id}/deliveries/${attempt!.id}/retry`,
    });
    expectStatus(res, 200);
    expect(res.json()).toEqual({ success: true });
    await drain();
    expect(rcv.requests).toHaveLength(2);
    const [first, again] = rcv.requests as [RecordedRequest, RecordedRequest];
    expect(header(again, 'x-service-event-id')).toBe(header(first, 'x-service-event-id'));
    expect(header(again, 'x-service-event-id')).toBe(attempt!.event_id);
    expect(again.body.equals(first.body)).toBe(true);
    expect(header(again, 'x-service-signature')).toBe(
      createHmac('sha256', wh.secret).update(again.body).digest('hex'),
    );
    expect((await attemptsOf(acc, wh.id)).total).toBe(2);
    expectError(
      await acc.call({
        method: 'POST',
        url: `/v1/webhooks/${wh.id}/deliveries/dlv_doesnotexist/retry`,
      }),
      404,
    );
  });

  it('a receiver that takes longer than 10 s is a failure', { timeout: 25_000 }, async () => {
    const rcv = await receiver([{ status: 200, delayMs: 10_500 }], { status: 200 });
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'), ['contact.created']);
    await createContact(acc);
    await drain();
    expect(rcv.requests).toHaveLength(1);
    const log = await attemptsOf(acc, wh.id);
    expect(log.data[0]).toMatchObject({
      attempt: 1,
      status_code: null,
      error: expect.stringMatching(/10000 ms|time/i),
    });
    expect((await deliveryRow(acc, wh.id)).state).toBe('pending');
    t.clock.advance(5_000);
    await drain();
    expect(rcv.requests).toHaveLength(2);
    expect((await deliveryRow(acc, wh.id)).state).toBe('delivered');
  });
});
