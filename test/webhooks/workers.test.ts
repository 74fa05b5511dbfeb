import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createDb } from '../../src/db/database.js';
import { newAccount, type TestAccount } from '../helpers.js';
import { startHttpsServer, type RecordedRequest } from '../https-server.js';
import { createContact, expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';

let t: WebhookTestApp;
beforeAll(async () => {
  t = await startWebhookTestApp();
});
afterAll(() => t.close());

afterEach(async () => {
  // What a test left queued must not count in the next one.
  await t.db
    .updateTable('webhook_deliveries')
    .set({ state: 'failed', locked_until: null })
    .where('state', '=', 'pending')
    .execute();
});

async function createWebhook(
  acc: TestAccount,
  url: string,
  events: string[] = ['contact.created'],
): Promise<{ id: string; secret: string }> {
  const res = await acc.call({ method: 'POST', url: '/v1/webhooks', payload: { url, events } });
  expectStatus(res, 201);
  return res.json();
}

const eventId = (r: RecordedRequest) => r.headers['x-service-event-id'] as string;

it('a slow receiver does not hold up other webhooks (per-webhook concurrency)', async () => {
  const slow = await startHttpsServer(() => ({ status: 200, delayMs: 3_000 }));
  // How many requests the slow receiver had got when the fast one got each of its own.
  const slowSeenByFast: number[] = [];
  const fast = await startHttpsServer(() => {
    slowSeenByFast.push(slow.requests.length);
    return { status: 200 };
  });
  const dispatcher = t.dispatcher({ perWebhook: 4, maxInFlight: 8 });
  try {
    const accA = await newAccount(t);
    const accB = await newAccount(t);
    // A's webhook and events come first: it is first in line for every claim.
    const whA = await createWebhook(accA, slow.url('/a'));
    const whB = await createWebhook(accB, fast.url('/b'));
    for (let i = 0; i < 40; i++) await createContact(accA);
    for (let i = 0; i < 5; i++) await createContact(accB);

    dispatcher.start();
    await expect.poll(() => fast.requests.length, { timeout: 20_000 }).toBe(5);
    // B got all 5 while A was still on its first batch of 4 (A's 5th request needs a slot freed by a 3 s answer).
    expect(slowSeenByFast).toHaveLength(5);
    expect(Math.max(...slowSeenByFast)).toBeLessThan(8);
    expect(slow.requests.length).toBeLessThanOrEqual(8);
    const pendingA = await t.db
      .selectFrom('webhook_deliveries')
      .select('state')
      .where('account_id', '=', accA.accountId)
      .where('webhook_id', '=', whA.id)
      .where('state', '=', 'pending')
      .execute();
    expect(pendingA.length).toBeGreaterThan(30);
    await expect
      .poll(
        async () =>
          (
            await t.db
              .selectFrom('webhook_deliveries')
              .select('state')
              .where('account_id', '=', accB.accountId)
              .where('webhook_id', '=', whB.id)
              .execute()
          ).map((r) => r.state),
        { timeout: 10_000 },
      )
      .toEqual(['delivered', 'delivered', 'delivered', 'delivered', 'delivered']);
  } finally {
    await dispatcher.stop();
    await slow.close();
    await fast.close();
  }
});

it('two dispatchers on two pools draining 200 deliveries concurrently attempt each (webhook, event) exactly once', async () => {
  const rcv = await startHttpsServer(() => ({ status: 200, delayMs: 10 }));
  const dbs = [createDb(t.databaseUrl, { max: 5 }), createDb(t.databaseUrl, { max: 5 })];
  try {
    const acc = await newAccount(t);
    const hooks = [];
    for (let i = 0; i < 4; i++) hooks.push(await createWebhook(acc, rcv.url(`/w${i}`)));
    for (let i = 0; i < 50; i++) await createContact(acc);
    const queued = await t.db
      .selectFrom('webhook_deliveries')
      .select('event_id')
      .where('account_id', '=', acc.accountId)
      .where('state', '=', 'pending')
      .execute();
    expect(queued).toHaveLength(200);

    const dispatchers = dbs.map((db) => t.dispatcher({ db, perWebhook: 4, maxInFlight: 8 }));
    const counts = await Promise.all(dispatchers.map((d) => d.drain()));
    await Promise.all(dispatchers.map((d) => d.stop()));

    expect(counts[0]! + counts[1]!).toBe(200);
    // Both took part (otherwise this would not test concurrency).
    expect(counts[0]).toBeGreaterThan(0);
    expect(counts[1]).toBeGreaterThan(0);

    expect(rcv.requests).toHaveLength(200);
    const received = new Set(rcv.requests.map((r) => `${r.url} ${eventId(r)}`));
    expect(received.size).toBe(200);
    for (const r of rcv.requests) expect(r.headers['x-service-delivery-attempt']).toBe('1');

    const attempts = await t.db
      .selectFrom('webhook_attempts')
      .select(['webhook_id', 'event_id', 'attempt', 'status_code'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(attempts).toHaveLength(200);
    expect(new Set(attempts.map((a) => `${a.webhook_id} ${a.event_id}`)).size).toBe(200);
    expect(attempts.every((a) => a.attempt === 1 && a.status_code === 200)).toBe(true);

    const states = await t.db
      .selectFrom('webhook_deliveries')
      .select(['state', 'attempts'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(states).toHaveLength(200);
    expect(states.every((s) => s.state === 'delivered' && s.attempts === 1)).toBe(true);
    // Every event reached every webhook.
    const events = await t.db
      .selectFrom('events')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(events).toHaveLength(50);
    for (const [i] of hooks.entries()) {
      expect(new Set(rcv.requests.filter((r) => r.url === `/w${i}`).map(eventId))).toEqual(
        new Set(events.map((e) => e.id)),
      );
    }
  } finally {
    await Promise.all(dbs.map((db) => db.destroy()));
    await rcv.close();
  }
});

it('a delivery leased by a dead worker is not delivered until its lease ends, then it is', async () => {
  const rcv = await startHttpsServer(() => ({ status: 200 }));
  try {
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, rcv.url('/hook'));
    await createContact(acc);
    // As if a worker had claimed it and died: attempt counted, lease a minute into the future.
    await t.db
      .updateTable('webhook_deliveries')
      .set({ locked_until: new Date(t.clock.now().getTime() + 60_000), attempts: 1 })
      .where('account_id', '=', acc.accountId)
      .where('webhook_id', '=', wh.id)
      .execute();

    const d1 = t.dispatcher();
    expect(await d1.drain()).toBe(0);
    await d1.stop();
    expect(rcv.requests).toHaveLength(0);

    t.clock.advance(59_000);
    const d2 = t.dispatcher();
    expect(await d2.drain()).toBe(0);
    await d2.stop();
    expect(rcv.requests).toHaveLength(0);

    t.clock.advance(1_001);
    const d3 = t.dispatcher();
    expect(await d3.drain()).toBe(1);
    await d3.stop();
    expect(rcv.requests).toHaveLength(1);
    expect(rcv.requests[0]!.headers['x-service-delivery-attempt']).toBe('2');
    const row = await t.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .where('webhook_id', '=', wh.id)
      .executeTakeFirstOrThrow();
    expect(row.state).toBe('delivered');
    expect(row.locked_until).toBeNull();
  } finally {
    await rcv.close();
  }
});

it('a dispatcher whose only due webhook is at its limit waits for a slot instead of claiming in a loop', async () => {
  const slow = await startHttpsServer(() => ({ status: 200, delayMs: 1_500 }));
  const dispatcher = t.dispatcher({ perWebhook: 2, pollIntervalMs: 50 });
  try {
    const acc = await newAccount(t);
    await createWebhook(acc, slow.url('/saturated'));
    for (let i = 0; i < 6; i++) await createContact(acc);
    dispatcher.start();
    await expect.poll(() => slow.requests.length, { timeout: 5_000 }).toBe(2);
    const before = dispatcher.claims;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // Polling every 50 ms is about 20 claims a second; a loop would run hundreds.
    expect(dispatcher.claims - before).toBeLessThanOrEqual(30);
    expect(slow.requests.length).toBe(2);
  } finally {
    await dispatcher.stop();
    await slow.close();
  }
});
