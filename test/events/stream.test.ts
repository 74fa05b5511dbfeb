import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import pg from 'pg';
import { ulid } from 'ulid';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EventsRepository } from '../../src/events/events.repository.js';
import { Outbox } from '../../src/events/outbox.js';
import type { EventPayloads, EventType } from '../../src/events/event-types.js';
import { newId } from '../../src/ids.js';
import { WebhookDispatcher } from '../../src/webhooks/webhook-dispatcher.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { SseClient } from './sse-client.js';
import { testDatabaseUrl } from '../database.js';
import { testWebhookSecrets } from '../secrets-key.js';

/*
 * GET /v1/events/stream over real sockets: a client that reads the response as it arrives.
 * Every test makes its own account, so the shared database's other events never show up.
 */

let t: TestApp;
let base: string;
const clients: SseClient[] = [];

async function listen(app: TestApp): Promise<string> {
  await app.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.app.server.address() as AddressInfo;
  return `http://127.0.0.1:${port}`;
}

async function stream(
  acc: TestAccount | null,
  query = '',
  headers: Record<string, string> = {},
  at = base,
): Promise<SseClient> {
  const client = await SseClient.open(`${at}/v1/events/stream${query}`, {
    ...(acc ? { authorization: `Bearer ${acc.apiKey}` } : {}),
    ...headers,
  });
  clients.push(client);
  return client;
}

/** Records an event as a service would, in a transaction of its own (no API request counted). */
async function record<E extends EventType>(
  app: TestApp,
  accountId: string,
  type: E,
  data: EventPayloads[E],
): Promise<string> {
  return app.db
    .transaction()
    .execute((trx) => new Outbox(app.clock).record(trx, accountId, type, data));
}

const fakeContact = (n: number) =>
  ({ id: `con_${n}`, n }) as unknown as EventPayloads['contact.created'];

async function createContact(acc: TestAccount): Promise<{ id: string }> {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/contacts',
    payload: { phone: randomPhone() },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

beforeAll(async () => {
  t = await startTestApp({ eventStreams: { keepAliveMs: 200 } });
  base = await listen(t);
});
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});
afterAll(() => t.close());

describe('GET /v1/events/stream', () => {
  it('answers 401 without a key, in the error envelope', async () => {
    const res = await stream(null);
    await res.until(() => res.ended);
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'unauthorized' } });
  });

  it('sends its headers and the retry hint at once, before any event', async () => {
    const acc = await newAccount(t);
    const s = await stream(acc);
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(s.headers['cache-control']).toBe('no-cache');
    expect(s.headers['x-accel-buffering']).toBe('no');
    await s.until(() => s.retry !== null, 5_000, 'the retry hint');
    expect(s.retry).toBe(2000);
    expect(s.messages).toEqual([]);
  });

  it('streams each event as it is committed, in the exact bytes a webhook receives, id = event id', async () => {
    const acc = await newAccount(t);
    const receiver = await startHttpsServer(() => ({ status: 204 }));
    try {
      const wh = await acc.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: receiver.url('/hook'), events: ['contact.created'] },
      });
      expect(wh.statusCode).toBe(201);
      const s = await stream(acc);
      await s.until(() => s.retry !== null);
      const contact = await createContact(acc);
      await s.until(() => s.messages.length === 1, 5_000, 'contact.created');
      const [message] = s.messages;
      const [event] = s.events;
      expect(message!.event).toBe('contact.created');
      expect(event!.body).toMatchObject({
        id: message!.id,
        event: 'contact.created',
        data: contact,
      });
      expect(message!.id).toMatch(/^evt_/);

      const dispatcher = new WebhookDispatcher({
        db: t.db,
        secrets: testWebhookSecrets(),
        clock: t.clock,
        log: t.app.log,
        allowPrivate: true,
        accountId: acc.accountId,
      });
      expect(await dispatcher.drain()).toBe(1);
      await dispatcher.stop();
      expect(receiver.requests[0]!.body.toString()).toBe(message!.data);
    } finally {
      await receiver.close();
    }
  });

  it('sends only the types asked for, and refuses an unknown type with a 422 before streaming', async () => {
    const acc = await newAccount(t);
    const s = await stream(acc, '?events=message.received,conversation.resolved');
    await s.until(() => s.retry !== null);
    const inbound = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: { channel: 'whatsapp', phone: randomPhone(), type: 'text', content: 'hi' },
    });
    expect(inbound.statusCode, inbound.body).toBe(201);
    await s.until(() => s.messages.length >= 1, 5_000, 'message.received');
    // contact.created came first, in the same transaction: passed over, not sent.
    await record(t, acc.accountId, 'contact.created', fakeContact(1));
    const resolved = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${inbound.json<{ conversation_id: string }>().conversation_id}/resolve`,
    });
    expect(resolved.statusCode, resolved.body).toBe(200);
    await s.until(() => s.messages.length >= 2, 5_000, 'conversation.resolved');
    expect(s.messages.map((m) => m.event)).toEqual(['message.received', 'conversation.resolved']);

    const bad = await stream(acc, '?events=message.received,message.exploded');
    await bad.until(() => bad.ended);
    expect(bad.status).toBe(422);
    expect(JSON.parse(bad.body)).toMatchObject({
      error: { code: 'validation_error', details: [{ field: 'events' }] },
    });
    const empty = await stream(acc, '?events=');
    await empty.until(() => empty.ended);
    expect(empty.status).toBe(422);
  });

  it("reads each commit once for all of an account's streams that have caught up, whatever types each wants", async () => {
    const acc = await newAccount(t);
    const all = await Promise.all(Array.from({ length: 16 }, () => stream(acc)));
    const contactsOnly = await Promise.all(
      Array.from({ length: 4 }, () => stream(acc, '?events=contact.created')),
    );
    const streams = [...all, ...contactsOnly];
    for (const s of streams) await s.until(() => s.retry !== null);
    // The first event brings every stream to the same place, however each one started.
    await record(t, acc.accountId, 'contact.created', fakeContact(0));
    for (const s of streams) await s.until(() => s.messages.length === 1, 5_000, 'the first event');

    const reads = vi.spyOn(EventsRepository.prototype, 'readAfter');
    try {
      for (let n = 1; n <= 5; n++) {
        const type = n % 2 === 0 ? 'contact.created' : 'contact.updated';
        await record(t, acc.accountId, type, fakeContact(n));
        for (const s of all) await s.until(() => s.messages.length === n + 1, 5_000, `event ${n}`);
      }
      for (const s of contactsOnly) await s.until(() => s.messages.length === 3);
      const ofAccount = reads.mock.calls.filter(([accountId]) => accountId === acc.accountId);
      // One read per commit (and at most one more when a wake-up finds an event not yet
      // settled), not one per stream: 20 streams reading for themselves would be 100 or more.
      expect(ofAccount.length).toBeGreaterThanOrEqual(5);
      expect(ofAccount.length).toBeLessThanOrEqual(12);
    } finally {
      reads.mockRestore();
    }
    for (const s of all)
      expect(s.events.map((e) => (e.body.data as { n: number }).n)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const s of contactsOnly) {
      expect(s.events.map((e) => (e.body.data as { n: number }).n)).toEqual([0, 2, 4]);
      expect(s.messages.map((m) => m.event)).toEqual(Array(3).fill('contact.created'));
    }
    // The same bytes on every stream.
    expect(new Set(all.map((s) => s.messages.map((m) => m.data).join('\n'))).size).toBe(1);
  });

  it('resumes after Last-Event-ID with exactly what was missed, no duplicates', async () => {
    const acc = await newAccount(t);
    const first = await stream(acc);
    await first.until(() => first.retry !== null);
    const a = await record(t, acc.accountId, 'contact.created', fakeContact(1));
    await first.until(() => first.messages.length === 1);
    first.close();
    const missed = [
      await record(t, acc.accountId, 'contact.created', fakeContact(2)),
      await record(t, acc.accountId, 'contact.created', fakeContact(3)),
    ];
    const again = await stream(acc, '', { 'last-event-id': a });
    await again.until(() => again.messages.length >= 2, 5_000, 'the missed events');
    const later = await record(t, acc.accountId, 'contact.created', fakeContact(4));
    await again.until(() => again.messages.length >= 3);
    await new Promise((r) => setTimeout(r, 300));
    expect(again.messages.map((m) => m.id)).toEqual([...missed, later]);

    // The query parameter, for clients that cannot set headers; the header wins over it.
    const byQuery = await stream(acc, `?last_event_id=${missed[1]}`);
    await byQuery.until(() => byQuery.messages.length >= 1);
    expect(byQuery.messages.map((m) => m.id)).toEqual([later]);
    const both = await stream(acc, `?last_event_id=${a}`, { 'last-event-id': missed[1]! });
    await both.until(() => both.messages.length >= 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(both.messages.map((m) => m.id)).toEqual([later]);
  });

  it('names where it starts in an id-only opening, which resumes a client dropped before any event', async () => {
    const acc = await newAccount(t);
    const first = await stream(acc, '?events=contact.created');
    await first.until(() => first.lastEventId !== undefined, 5_000, 'the opening id');
    const start = first.lastEventId!;
    expect(start).toMatch(/^pos_\d+_0$/);
    expect(first.messages).toEqual([]);
    expect(first.body).toMatch(new RegExp(`^retry: 2000\nid: ${start}\n\n`));
    first.close();
    const missed = [
      await record(t, acc.accountId, 'contact.created', fakeContact(1)),
      await record(t, acc.accountId, 'contact.created', fakeContact(2)),
    ];
    const again = await stream(acc, '?events=contact.created', { 'last-event-id': start });
    await again.until(() => again.messages.length >= 2, 5_000, 'the missed events');
    await new Promise((r) => setTimeout(r, 200));
    expect(again.messages.map((m) => m.id)).toEqual(missed);
    // A resumed stream names no place of its own: the client has one.
    expect(again.body).toMatch(/^retry: 2000\n\n/);
    expect(again.lastEventId).toBe(missed[1]);
    // The query parameter takes it too.
    const byQuery = await stream(acc, `?events=contact.created&last_event_id=${start}`);
    await byQuery.until(() => byQuery.messages.length >= 2);
    expect(byQuery.messages.map((m) => m.id)).toEqual(missed);

    // A place ahead of any the stream has handed out, or out of range, is a guess: 422.
    for (const id of [
      'pos_99999999999999_0',
      `pos_${'9'.repeat(21)}_0`,
      `pos_1_${'9'.repeat(19)}`,
      'pos_1_x',
    ]) {
      const s = await stream(acc, '', { 'last-event-id': id });
      await s.until(() => s.ended);
      expect(s.status, id).toBe(422);
      expect(JSON.parse(s.body)).toMatchObject({
        error: { code: 'validation_error', details: [{ field: 'Last-Event-ID' }] },
      });
    }
  });

  it('refuses an unknown event id (422) and resumes an expired one from the oldest event kept', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const theirs = await record(t, other.accountId, 'contact.created', fakeContact(0));
    for (const id of [newId('evt'), theirs, 'not-an-id']) {
      const s = await stream(acc, '', { 'last-event-id': id });
      await s.until(() => s.ended);
      expect(s.status, id).toBe(422);
      expect(JSON.parse(s.body)).toMatchObject({
        error: { code: 'validation_error', details: [{ field: 'Last-Event-ID' }] },
      });
    }
    const kept = [
      await record(t, acc.accountId, 'contact.created', fakeContact(1)),
      await record(t, acc.accountId, 'contact.created', fakeContact(2)),
    ];
    const expired = `evt_${ulid(Date.now() - 8 * 86_400_000)}`;
    const s = await stream(acc, '', { 'last-event-id': expired });
    await s.until(() => s.messages.length >= 2);
    expect(s.messages.map((m) => m.id)).toEqual(kept);
  });

  it("never sends another account's events", async () => {
    const mine = await newAccount(t);
    const theirs = await newAccount(t);
    const s = await stream(mine);
    await s.until(() => s.retry !== null);
    await record(t, theirs.accountId, 'contact.created', fakeContact(1));
    await createContact(theirs);
    const own = await record(t, mine.accountId, 'contact.created', fakeContact(2));
    await s.until(() => s.messages.length >= 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(s.messages.map((m) => m.id)).toEqual([own]);
  });

  it('sends a keep-alive comment while idle', async () => {
    const acc = await newAccount(t);
    const s = await stream(acc);
    await s.until(() => s.comments.includes('keep-alive'), 5_000, 'a keep-alive');
    expect(s.body).toContain('\n: keep-alive\n\n');
  });

  it('counts against the rate limit once per connection, never per event', async () => {
    const acc = await newAccount(t, { rateLimit: 10 });
    const s = await stream(acc);
    expect(s.headers['x-ratelimit-remaining']).toBe('9');
    for (let i = 0; i < 12; i++) await record(t, acc.accountId, 'contact.created', fakeContact(i));
    await s.until(() => s.messages.length === 12, 5_000, '12 events');
    const after = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(after.statusCode).toBe(200);
    expect(after.headers['x-ratelimit-remaining']).toBe('8');
  });

  it('frees its feed subscription and its place when the client goes away', async () => {
    const acc = await newAccount(t);
    const before = t.services.eventFeed.subscriptions;
    const open = t.services.eventStreams.openStreams;
    const s = await stream(acc);
    await s.until(() => s.retry !== null);
    expect(t.services.eventFeed.subscriptions).toBe(before + 1);
    expect(t.services.eventStreams.openStreams).toBe(open + 1);
    s.close();
    await expect
      .poll(() => [t.services.eventFeed.subscriptions, t.services.eventStreams.openStreams])
      .toEqual([before, open]);
  });

  it('answers HEAD with the headers and opens nothing: 500 HEADs later, GET still streams', async () => {
    const acc = await newAccount(t);
    const open = t.services.eventStreams.openStreams;
    const subscriptions = t.services.eventFeed.subscriptions;
    const head = (path: string) =>
      new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = http.request(`${base}${path}`, {
          method: 'HEAD',
          agent: false,
          headers: { authorization: `Bearer ${acc.apiKey}` },
        });
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve(res));
        });
        req.on('error', reject);
        req.end();
      });
    // More than the 500 streams an account may hold open: each HEAD held one until restart.
    for (let i = 0; i < 510; i += 30) {
      const answers = await Promise.all(
        Array.from({ length: Math.min(30, 510 - i) }, () => head('/v1/events/stream')),
      );
      for (const res of answers) {
        expect(res.statusCode).toBe(200);
        expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      }
    }
    expect(t.services.eventStreams.openStreams).toBe(open);
    expect(t.services.eventFeed.subscriptions).toBe(subscriptions);
    // It refuses what a GET would refuse, in the same words (the envelope is a GET's to read).
    expect((await head('/v1/events/stream?events=nope')).statusCode).toBe(422);
    const s = await stream(acc);
    expect(s.status).toBe(200);
    await s.until(() => s.retry !== null);
    await record(t, acc.accountId, 'contact.created', fakeContact(1));
    await s.until(() => s.messages.length === 1, 5_000, 'the event');
    s.close();
    await expect.poll(() => t.services.eventStreams.openStreams).toBe(open);
  });

  it('caps the streams one account holds open on a server (429 with Retry-After)', async () => {
    const capped = await startTestApp({ eventStreams: { maxPerAccount: 2 } });
    try {
      const at = await listen(capped);
      const acc = await newAccount(capped);
      const one = await stream(acc, '', {}, at);
      const two = await stream(acc, '', {}, at);
      const three = await stream(acc, '', {}, at);
      await three.until(() => three.ended);
      expect([one.status, two.status, three.status]).toEqual([200, 200, 429]);
      expect(three.headers['retry-after']).toBe('5');
      expect(JSON.parse(three.body)).toMatchObject({ error: { code: 'rate_limited' } });
      // Another account is not held back by this one.
      const other = await stream(await newAccount(capped), '', {}, at);
      expect(other.status).toBe(200);
      one.close();
      await expect.poll(() => capped.services.eventStreams.openStreams).toBe(2);
      const four = await stream(acc, '', {}, at);
      expect(four.status).toBe(200);
    } finally {
      for (const c of clients.splice(0)) c.close();
      await capped.close();
    }
  });
});

describe('the per-process cap', () => {
  it('a server holding its most event streams refuses another with 503 unavailable and Retry-After', async () => {
    const capped = await startTestApp({ eventStreams: { maxPerProcess: 2 } });
    try {
      const at = await listen(capped);
      const [a, b, c] = [
        await newAccount(capped),
        await newAccount(capped),
        await newAccount(capped),
      ];
      const one = await stream(a, '', {}, at);
      const two = await stream(b, '', {}, at);
      const three = await stream(c, '', {}, at);
      await three.until(() => three.ended);
      expect([one.status, two.status, three.status]).toEqual([200, 200, 503]);
      expect(three.headers['retry-after']).toBeDefined();
      expect(JSON.parse(three.body)).toMatchObject({ error: { code: 'unavailable' } });
      two.close();
      await expect.poll(() => capped.services.eventStreams.openStreams).toBe(1);
      const four = await stream(c, '', {}, at);
      expect(four.status).toBe(200);
    } finally {
      for (const client of clients.splice(0)) client.close();
      await capped.close();
    }
  });
});

describe('across API processes', () => {
  it('streams, through one process, the events another process commits (LISTEN/NOTIFY, no polling)', async () => {
    const writer = await startTestApp();
    const reader = await startTestApp({ eventStreams: { pollMs: 60_000 } });
    try {
      const at = await listen(reader);
      const acc = await newAccount(writer);
      const s = await stream(acc, '', {}, at);
      await s.until(() => s.retry !== null);
      await expect.poll(() => reader.services.eventFeed.listening).toBe(true);
      const started = Date.now();
      const contact = await createContact(acc);
      await s.until(() => s.messages.length === 1, 5_000, 'the other process event');
      // Polling is off (60 s): only the notification can have brought it this soon.
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(s.events[0]!.body).toMatchObject({ event: 'contact.created', data: contact });
    } finally {
      for (const c of clients.splice(0)) c.close();
      await reader.close();
      await writer.close();
    }
  });

  it('keeps streaming when its listening connection is lost, and listens again', async () => {
    const app = await startTestApp({ readCache: false });
    const feedApp = await startTestApp();
    try {
      const at = await listen(feedApp);
      const acc = await newAccount(feedApp);
      const s = await stream(acc, '', {}, at);
      await expect.poll(() => feedApp.services.eventFeed.listenerPid).not.toBeNull();
      const pid = feedApp.services.eventFeed.listenerPid!;
      await sql`SELECT pg_terminate_backend(${pid})`.execute(app.db);
      await expect.poll(() => feedApp.services.eventFeed.listenerPid).not.toBe(pid);
      // Whether it is polling or listening again by now, the event arrives.
      const id = await record(app, acc.accountId, 'contact.created', fakeContact(1));
      await s.until(() => s.messages.length === 1, 5_000, 'the event after the loss');
      expect(s.messages[0]!.id).toBe(id);
      await expect.poll(() => feedApp.services.eventFeed.listening, { timeout: 5_000 }).toBe(true);
      const next = await record(app, acc.accountId, 'contact.created', fakeContact(2));
      await s.until(() => s.messages.length === 2, 5_000, 'the event once listening again');
      expect(s.messages[1]!.id).toBe(next);
    } finally {
      for (const c of clients.splice(0)) c.close();
      await feedApp.close();
      await app.close();
    }
  });

  it('polls every second while it cannot listen, so nothing is missed', async () => {
    const polling = await startTestApp({ readCache: false });
    try {
      const at = await listen(polling);
      const acc = await newAccount(polling);
      const s = await stream(acc, '', {}, at);
      await s.until(() => s.retry !== null);
      expect(polling.services.eventFeed.listening).toBe(false);
      const id = await record(polling, acc.accountId, 'contact.created', fakeContact(1));
      await s.until(() => s.messages.length === 1, 5_000, 'the polled event');
      expect(s.messages[0]!.id).toBe(id);
    } finally {
      for (const c of clients.splice(0)) c.close();
      await polling.close();
    }
  });
});

describe('transactions that commit out of order', () => {
  let a: pg.Client;
  let b: pg.Client;
  beforeAll(async () => {
    a = new pg.Client({ connectionString: testDatabaseUrl() });
    b = new pg.Client({ connectionString: testDatabaseUrl() });
    await Promise.all([a.connect(), b.connect()]);
  });
  afterAll(async () => {
    await Promise.all([a.end(), b.end()]);
  });

  async function insert(client: pg.Client, accountId: string, n: number): Promise<string> {
    const id = newId('evt');
    await client.query(
      `INSERT INTO events (account_id, id, type, data, created_at) VALUES ($1, $2, 'contact.created', $3, now())`,
      [accountId, id, JSON.stringify(fakeContact(n))],
    );
    return id;
  }
  const seqOf = async (id: string) =>
    (await t.db.selectFrom('events').select('seq').where('id', '=', id).executeTakeFirstOrThrow())
      .seq;

  it('does not lose an event whose lower seq commits after a higher one was streamed', async () => {
    const acc = await newAccount(t);
    const s = await stream(acc);
    await s.until(() => s.retry !== null);
    await a.query('BEGIN');
    const early = await insert(a, acc.accountId, 1); // takes the lower seq, commits last
    await b.query('BEGIN');
    const late = await insert(b, acc.accountId, 2);
    await b.query('COMMIT');
    // A reader by seq alone would send `late` now and move past `early` for good.
    await new Promise((r) => setTimeout(r, 400));
    expect(s.messages).toEqual([]);
    await a.query('COMMIT');
    await s.until(() => s.messages.length === 2, 5_000, 'both events');
    expect(Number(await seqOf(early))).toBeLessThan(Number(await seqOf(late)));
    expect(s.messages.map((m) => m.id)).toEqual([early, late]);
    // Resuming after the last one repeats nothing.
    const again = await stream(acc, '', { 'last-event-id': late });
    await again.until(() => again.retry !== null);
    await new Promise((r) => setTimeout(r, 300));
    expect(again.messages).toEqual([]);
  });

  it('does not lose an event of an older transaction that took its seq after a newer one', async () => {
    const acc = await newAccount(t);
    const s = await stream(acc);
    await s.until(() => s.retry !== null);
    await a.query('BEGIN');
    await a.query('SELECT pg_current_xact_id()'); // the older transaction...
    await b.query('BEGIN');
    const low = await insert(b, acc.accountId, 1); // ...the newer takes the lower seq
    const high = await insert(a, acc.accountId, 2);
    await a.query('COMMIT');
    await s.until(() => s.messages.length === 1, 5_000, 'the older transaction event');
    expect(s.messages[0]!.id).toBe(high);
    await b.query('COMMIT');
    await s.until(() => s.messages.length === 2, 5_000, 'the newer transaction event');
    expect(s.messages.map((m) => m.id)).toEqual([high, low]);
    // A client that resumes after `high` (it had only that) still gets `low`.
    const again = await stream(acc, '', { 'last-event-id': high });
    await again.until(() => again.messages.length === 1);
    expect(again.messages[0]!.id).toBe(low);
  });

  it('sends an event held behind a transaction that writes no event as soon as that one ends', async () => {
    const acc = await newAccount(t);
    const s = await stream(acc);
    await s.until(() => s.retry !== null);
    await a.query('BEGIN');
    await a.query('SELECT pg_current_xact_id()'); // a running writer: no notification will come
    const id = await record(t, acc.accountId, 'contact.created', fakeContact(1));
    await new Promise((r) => setTimeout(r, 300));
    expect(s.messages).toEqual([]);
    await a.query('ROLLBACK');
    await s.until(() => s.messages.length === 1, 5_000, 'the held event');
    expect(s.messages[0]!.id).toBe(id);
  });
});

describe('shutdown', () => {
  it('ends open streams promptly when the app closes', async () => {
    const app = await startTestApp();
    const at = await listen(app);
    const acc = await newAccount(app);
    const s = await stream(acc, '', {}, at);
    await s.until(() => s.retry !== null);
    const started = Date.now();
    await app.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    await s.until(() => s.ended, 5_000, 'the end of the stream');
    expect(app.services.eventFeed.subscriptions).toBe(0);
  });
});
