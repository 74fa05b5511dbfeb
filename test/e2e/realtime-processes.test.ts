import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrivateDatabase } from '../helpers.js';
import { SseClient } from '../events/sse-client.js';
import { startService, startWorker, stopProcess, type ServiceProcess } from './process.js';

const ADMIN = 'e2e-realtime-admin-token-0123';
const ORIGIN = 'https://shop.example';
/** Generous: the one-second target is the benchmark's to measure, not this test's. */
const WITHIN_MS = 5_000;

/** JSON over HTTP, asserting the status; the answer's body. */
async function call<T>(
  base: string,
  method: string,
  path: string,
  opts: { auth?: string; body?: unknown; headers?: Record<string, string>; status: number },
): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(opts.auth ? { authorization: `Bearer ${opts.auth}` } : {}),
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...opts.headers,
    },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await res.text();
  expect(res.status, `${method} ${path}: ${text}`).toBe(opts.status);
  return (text === '' ? null : JSON.parse(text)) as T;
}

interface WebchatMessage {
  id: string;
  client_id: string | null;
  author: 'visitor' | 'team';
  type: string;
  content: string | null;
  created_at: string;
}

interface Envelope {
  id: string;
  event: string;
  data: { id: string; phone: string };
}

// Two API processes and a worker, started as an operator scales out, on one private database:
// what one process commits reaches streams held by the other (DESIGN §4).
describe('realtime across real API processes', () => {
  let db: { url: string; drop: () => Promise<void> };
  const processes: ServiceProcess[] = [];
  const streams: SseClient[] = [];
  let a: ServiceProcess;
  let b: ServiceProcess;

  beforeAll(async () => {
    db = await createPrivateDatabase();
    const env = {
      DATABASE_URL: db.url,
      ADMIN_TOKEN: ADMIN,
      // Shared by every process, as in production: visitor tokens one signs, another verifies.
      SECRETS_KEY: randomBytes(32).toString('base64'),
    };
    const started = await Promise.allSettled([
      startService(env, ['serve', '--no-workers']),
      startService(env, ['serve', '--no-workers']),
      startWorker(env),
    ]);
    for (const s of started) if (s.status === 'fulfilled') processes.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    [a, b] = processes as [ServiceProcess, ServiceProcess];
  });

  afterAll(async () => {
    for (const s of streams) s.close();
    await Promise.all(processes.map(stopProcess));
    await db?.drop();
  });

  async function newAccount(name: string): Promise<string> {
    const account = await call<{ id: string }>(a.base, 'POST', '/admin/accounts', {
      auth: ADMIN,
      body: { name, plan: 'growth' },
      status: 201,
    });
    const key = await call<{ api_key: string }>(
      b.base,
      'POST',
      `/admin/accounts/${account.id}/api-keys`,
      { auth: ADMIN, body: {}, status: 201 },
    );
    return key.api_key;
  }

  async function open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const s = await SseClient.open(url, headers);
    streams.push(s);
    return s;
  }

  it("a webchat reply sent through process B reaches the visitor's stream on process A, which ends when the visitor may no longer read", async () => {
    const key = await newAccount('Realtime webchat');
    const webchat = {
      provider: 'webchat',
      allowed_origins: [ORIGIN],
      identity_verification: 'off',
      title: 'Shop support',
      greeting: 'Hi! How can we help?',
    };
    const connected = await call<{ settings: { widget_key: string } }>(
      a.base,
      'PUT',
      '/v1/channels/webchat',
      { auth: key, body: webchat, status: 200 },
    );
    const widget = `/webchat/v1/${connected.settings.widget_key}`;
    const session = await call<{ token: string; visitor: { identified: boolean } }>(
      a.base,
      'POST',
      `${widget}/session`,
      { headers: { origin: ORIGIN }, body: {}, status: 200 },
    );
    expect(session.visitor.identified).toBe(false);

    const stream = await open(
      `${a.base}${widget}/stream?token=${encodeURIComponent(session.token)}`,
      { origin: ORIGIN, accept: 'text/event-stream' },
    );
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    await stream.until(() => stream.messages.some((e) => e.event === 'ready'), WITHIN_MS, 'ready');

    const messageOn = (id: string) => () =>
      stream.messages.some(
        (e) => e.event === 'message' && (JSON.parse(e.data) as WebchatMessage).id === id,
      );

    // The visitor writes through B; their other tabs (this stream on A) hear of it too.
    const written = await call<WebchatMessage>(b.base, 'POST', `${widget}/messages`, {
      auth: session.token,
      headers: { origin: ORIGIN },
      body: { client_id: 'rt-visitor-0001', content: 'Hello from the widget' },
      status: 201,
    });
    await stream.until(messageOn(written.id), WITHIN_MS, "the visitor's own message");

    // The agent finds the conversation and replies through B.
    const conversations = await call<{ data: { contact_id: string; channel: string }[] }>(
      b.base,
      'GET',
      '/v1/conversations?channel=webchat',
      { auth: key, status: 200 },
    );
    expect(conversations.data).toHaveLength(1);
    const reply = await call<{ id: string; status: string }>(b.base, 'POST', '/v1/messages/send', {
      auth: key,
      body: {
        contact_id: conversations.data[0]!.contact_id,
        channel: 'webchat',
        type: 'text',
        content: 'A reply from process B',
      },
      status: 201,
    });
    await stream.until(messageOn(reply.id), WITHIN_MS, 'the reply sent through B');
    const event = stream.messages.find(
      (e) => e.event === 'message' && (JSON.parse(e.data) as WebchatMessage).id === reply.id,
    )!;
    const shown = JSON.parse(event.data) as WebchatMessage;
    expect(shown).toMatchObject({
      id: reply.id,
      author: 'team',
      type: 'text',
      content: 'A reply from process B',
    });
    // The event id is the message's creation time: Last-Event-ID resumes from it.
    expect(event.id).toBe(shown.created_at);
    expect(stream.ended).toBe(false);

    // Through B the account now requires identification: the anonymous visitor's stream on A
    // is told why and closed.
    await call(b.base, 'PUT', '/v1/channels/webchat', {
      auth: key,
      body: { ...webchat, identity_verification: 'required' },
      status: 200,
    });
    await stream.until(
      () => stream.messages.some((e) => e.event === 'end'),
      WITHIN_MS,
      'end event',
    );
    const end = stream.messages.find((e) => e.event === 'end')!;
    expect(JSON.parse(end.data)).toEqual({ reason: 'identify' });
    await stream.until(() => stream.ended, WITHIN_MS, 'the stream closing');
    expect(stream.messages.at(-1)).toBe(end);
    // And the visitor may indeed no longer read, on either process.
    for (const p of [a, b]) {
      await call(p.base, 'GET', `${widget}/messages`, {
        auth: session.token,
        headers: { origin: ORIGIN },
        status: 403,
      });
    }
  });

  it('the live event stream carries, on one process, the events another commits, and resumes on the other without replay', async () => {
    const key = await newAccount('Realtime events');
    const onA = await open(`${a.base}/v1/events/stream`, {
      authorization: `Bearer ${key}`,
      accept: 'text/event-stream',
    });
    expect(onA.status).toBe(200);
    expect(onA.headers['content-type']).toMatch(/^text\/event-stream/);
    await onA.until(() => onA.retry !== null, WITHIN_MS, 'the retry line');

    const first = await call<{ id: string }>(b.base, 'POST', '/v1/contacts', {
      auth: key,
      body: { phone: '+14155550123', name: 'Made on B' },
      status: 201,
    });
    await onA.until(
      () => onA.messages.length > 0,
      WITHIN_MS,
      'the contact.created event made on B',
    );
    expect(onA.messages).toHaveLength(1);
    const created = onA.messages[0]!;
    const envelope = JSON.parse(created.data) as Envelope;
    expect(created.event).toBe('contact.created');
    expect(envelope).toMatchObject({ event: 'contact.created', data: { id: first.id } });
    expect(envelope.id).toMatch(/^evt_/);
    expect(created.id).toBe(envelope.id);
    onA.close();

    // Made through B while no stream is open: a resumed stream owes it.
    const missed = await call<{ id: string }>(b.base, 'POST', '/v1/contacts', {
      auth: key,
      body: { phone: '+14155550124', name: 'Made while away' },
      status: 201,
    });
    // Resumed on B from the first event: exactly what was committed after it, none twice.
    const onB = await open(`${b.base}/v1/events/stream`, {
      authorization: `Bearer ${key}`,
      accept: 'text/event-stream',
      'last-event-id': envelope.id,
    });
    expect(onB.status).toBe(200);
    await onB.until(() => onB.messages.length > 0, WITHIN_MS, 'the event missed while away');
    const second = await call<{ id: string }>(a.base, 'POST', '/v1/contacts', {
      auth: key,
      body: { phone: '+14155550125', name: 'Made on A' },
      status: 201,
    });
    await onB.until(
      () => onB.messages.length > 1,
      WITHIN_MS,
      'the contact.created event made on A',
    );
    // Events come in commit order, so a replay of the first would have come before these.
    const resumed = onB.messages.map((e) => {
      const body = JSON.parse(e.data) as Envelope;
      expect(e.event).toBe('contact.created');
      expect(e.id).toBe(body.id);
      return body;
    });
    expect(resumed.map((e) => e.data.id)).toEqual([missed.id, second.id]);
    expect(resumed.map((e) => e.id)).not.toContain(envelope.id);
    expect(onB.ended).toBe(false);
  });
});
