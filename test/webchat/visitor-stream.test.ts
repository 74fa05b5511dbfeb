import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { eventsOf, expectError, expectStatus } from '../inbox-helpers.js';
import {
  connectWebchat,
  identifierHash,
  ORIGIN,
  SECRETS_KEY,
  standInForIdentities,
  type WebchatConnection,
  putWebchat as put,
} from './webchat-helpers.js';

let t: TestApp;
let base: string;
beforeAll(async () => {
  t = await startTestApp({
    config: { secretsKey: SECRETS_KEY },
    webchatLimits: { perAddress: 100_000, perVisitor: 100_000 },
  });
  standInForIdentities(t.services);
  base = await listen(t);
});
afterAll(() => t.close());

async function listen(app: TestApp): Promise<string> {
  await app.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.app.server.address() as AddressInfo).port}`;
}

interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/** A visitor's live stream, read in the background as it arrives. */
async function openStream(
  at: string,
  widgetKey: string,
  token: string,
  opts: { lastEventId?: string; since?: string } = {},
) {
  const abort = new AbortController();
  const q = new URLSearchParams({ token, ...(opts.since ? { since: opts.since } : {}) });
  const res = await fetch(`${at}/webchat/v1/${widgetKey}/stream?${q.toString()}`, {
    headers: {
      origin: ORIGIN,
      ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}),
    },
    signal: abort.signal,
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let waiters: (() => void)[] = [];
  const changed = () => {
    for (const w of waiters) w();
    waiters = [];
  };
  // Resolves when the service ended the response (not when the test aborts it).
  const ended = (async () => {
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) return true;
        text += decoder.decode(chunk.value, { stream: true });
        changed();
      }
    } catch {
      return false;
    } finally {
      changed();
    }
  })();
  let done = false;
  void ended.then(() => (done = true));
  const events = (): SseEvent[] =>
    text
      .split('\n\n')
      .slice(0, -1)
      .map((block) => {
        const e: SseEvent = { event: 'message', data: '' };
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) e.id = line.slice(4);
          else if (line.startsWith('event: ')) e.event = line.slice(7);
          else if (line.startsWith('data: ')) e.data = line.slice(6);
        }
        return e;
      })
      .filter((e) => e.data !== '' || e.event !== 'message');
  const messages = () =>
    events()
      .filter((e) => e.event === 'message')
      .map((e) => ({ eventId: e.id!, ...(JSON.parse(e.data) as { id: string; content: string }) }));
  return {
    text: () => text,
    events,
    messages,
    /** Resolves once `ok()` holds, failing after `ms`. */
    async until(what: string, ok: () => boolean, ms = 3_000) {
      const deadline = Date.now() + ms;
      while (!ok()) {
        const left = deadline - Date.now();
        if (left <= 0 || done) throw new Error(`no ${what} within ${ms} ms: ${text}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, left);
        });
      }
    },
    untilMessage(content: string, ms = 3_000) {
      return this.until(`"${content}"`, () => messages().some((m) => m.content === content), ms);
    },
    /** Whether the service ended the response within `ms`. */
    endedWithin: (ms: number) =>
      Promise.race([ended, new Promise<false>((r) => setTimeout(() => r(false), ms))]),
    close: async () => {
      abort.abort();
      await reader.cancel().catch(() => undefined);
    },
  };
}
type Stream = Awaited<ReturnType<typeof openStream>>;

/** The id of the last message event a stream had, what EventSource sends as Last-Event-ID. */
function lastMessageId(stream: Stream): string {
  return stream.messages().at(-1)!.eventId;
}

/** A visitor's calls, from the allowed origin. */
function visitorOf(app: TestApp, c: WebchatConnection) {
  let token = '';
  const call = (method: 'GET' | 'POST', path: string, payload?: Record<string, unknown>) =>
    app.app.inject({
      method,
      url: `/webchat/v1/${c.widget_key}/${path}`,
      headers: { origin: ORIGIN, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      ...(payload ? { payload } : {}),
    });
  return {
    call,
    get token() {
      return token;
    },
    async start() {
      const res = await call('POST', 'session', {});
      expectStatus(res, 200);
      token = res.json().token;
    },
    async identify(identifier: string, secret = c.identity_secret) {
      const res = await call('POST', 'identify', {
        identifier,
        identifier_hash: identifierHash(secret, identifier),
      });
      expectStatus(res, 200);
      token = res.json().token;
    },
    async send(content: string) {
      const res = await call('POST', 'messages', {
        client_id: `c_${Math.random().toString(36).slice(2, 12)}`,
        content,
      });
      expectStatus(res, 201);
    },
  };
}

/** An account with webchat, a visitor who wrote once (so has a contact), and that contact. */
async function chatting(opts: { identifier?: string } = {}) {
  const acc = await newAccount(t);
  const c = await connectWebchat(acc);
  const visitor = visitorOf(t, c);
  await visitor.start();
  if (opts.identifier) await visitor.identify(opts.identifier);
  await visitor.send('hello?');
  const [received] = await eventsOf(t.db, acc.accountId, 'message.received');
  const conversationId = (received!.data as { conversation_id: string }).conversation_id;
  const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}` });
  const contactId: string = conv.json().contact_id;
  const reply = async (content: string, through: TestAccount = acc) =>
    expectStatus(
      await through.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: contactId, channel: 'webchat', type: 'text', content },
      }),
      201,
    );
  return { acc, c, visitor, reply };
}

/**
 * Stores `n` messages in the account's one webchat conversation, as copies of its first (the
 * visitor's), `content` each, created from `at` one millisecond apart: as many as no visitor
 * could write in that time, without waking any stream.
 */
async function storeMessages(
  app: TestApp,
  acc: TestAccount,
  n: number,
  content: string,
  at: Date,
  tag = 'stored',
) {
  const first = await app.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', acc.accountId)
    .orderBy('created_at')
    .executeTakeFirstOrThrow();
  const rows = Array.from({ length: n }, (_, i) => ({
    ...first,
    id: `msg_${tag}_${String(i).padStart(5, '0')}`,
    content,
    provider_message_id: null,
    template_params: null,
    author: null,
    created_at: new Date(at.getTime() + i),
    updated_at: new Date(at.getTime() + i),
  }));
  for (let i = 0; i < rows.length; i += 200)
    await app.db
      .insertInto('messages')
      .values(rows.slice(i, i + 200))
      .execute();
}

/** Polls `ok` until it holds, failing after `ms` (a bound for a stuck test, not a timing). */
async function eventually(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`not ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The account's API through another app (another API process, with its own pool and feed). */
function through(other: TestApp, acc: TestAccount): TestAccount {
  return {
    ...acc,
    call: (o) =>
      other.app.inject({
        ...o,
        headers: { authorization: `Bearer ${acc.apiKey}`, ...(o.headers ?? {}) },
      }),
  };
}

/**
 * The stream ends with `event: end` and this reason after the change, without any other wake-up
 * (within 10 s: a bound for a hung stream, not a timing); a reply sent afterwards never reaches it.
 */
async function expectEnded(stream: Stream, reason: string, reply: (c: string) => Promise<void>) {
  expect(await stream.endedWithin(10_000)).toBe(true);
  const last = stream.events().at(-1)!;
  expect(last.event).toBe('end');
  expect(JSON.parse(last.data)).toEqual({ reason });
  await reply('after the change');
  await new Promise((r) => setTimeout(r, 300));
  expect(stream.text()).not.toContain('after the change');
}

describe('an open stream follows changes to the connection', () => {
  it('a settings change that keeps the origin, mode and secret keeps the stream', async () => {
    const { acc, c, visitor, reply } = await chatting({ identifier: 'user-keep' });
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      await put(acc, { title: 'New title', allowed_origins: [ORIGIN, 'https://other.example'] });
      await reply('still here');
      await stream.untilMessage('still here');
      expect(stream.events().some((e) => e.event === 'end')).toBe(false);
    } finally {
      await stream.close();
    }
  });

  it('verification made required ends an anonymous visitor’s stream (identify)', async () => {
    const { acc, c, visitor, reply } = await chatting();
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      await put(acc, { identity_verification: 'required' });
      await expectEnded(stream, 'identify', reply);
    } finally {
      await stream.close();
    }
  });

  it('its origin removed from allowed_origins, through another API process, ends it (forbidden)', async () => {
    const other = await startTestApp({ config: { secretsKey: SECRETS_KEY } });
    try {
      const { acc, c, visitor, reply } = await chatting();
      const stream = await openStream(base, c.widget_key, visitor.token);
      try {
        await stream.untilMessage('hello?');
        await put(through(other, acc), { allowed_origins: ['https://other.example'] });
        await expectEnded(stream, 'forbidden', reply);
      } finally {
        await stream.close();
      }
    } finally {
      await other.close();
    }
  });

  it('webchat deleted (and connected again under a new key) ends it (gone)', async () => {
    const { acc, c, visitor, reply } = await chatting();
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/webchat' }), 200);
      expect(await stream.endedWithin(10_000)).toBe(true);
      expect(JSON.parse(stream.events().at(-1)!.data)).toEqual({ reason: 'gone' });
      const again = await connectWebchat(acc);
      expect(again.widget_key).not.toBe(c.widget_key);
      await reply('to the new widget');
      await new Promise((r) => setTimeout(r, 300));
      expect(stream.text()).not.toContain('to the new widget');
      // The old key opens nothing any more.
      const res = await fetch(
        `${base}/webchat/v1/${c.widget_key}/stream?token=${encodeURIComponent(visitor.token)}`,
        { headers: { origin: ORIGIN } },
      );
      expect(res.status).toBe(404);
    } finally {
      await stream.close();
    }
  });

  it('webchat disconnected and connected again: the old tokens are refused everywhere, a new session works', async () => {
    const { acc, visitor } = await chatting({ identifier: 'user-reconnected' });
    const oldToken = visitor.token;
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/webchat' }), 200);
    const again = await connectWebchat(acc);
    const call = (
      method: 'GET' | 'POST',
      path: string,
      token: string,
      payload?: Record<string, unknown>,
    ) =>
      t.app.inject({
        method,
        url: `/webchat/v1/${again.widget_key}/${path}`,
        headers: { origin: ORIGIN, authorization: `Bearer ${token}` },
        ...(payload ? { payload } : {}),
      });
    expectError(await call('GET', 'messages', oldToken), 401);
    expectError(
      await call('POST', 'messages', oldToken, { client_id: 'client_after', content: 'still me?' }),
      401,
    );
    expectError(
      await call('POST', 'receipts', oldToken, { status: 'read', message_ids: ['msg_x'] }),
      401,
    );
    expectError(
      await call('POST', 'identify', oldToken, {
        identifier: 'user-reconnected',
        identifier_hash: identifierHash(again.identity_secret, 'user-reconnected'),
      }),
      401,
    );
    const stream = await fetch(
      `${base}/webchat/v1/${again.widget_key}/stream?token=${encodeURIComponent(oldToken)}`,
      { headers: { origin: ORIGIN } },
    );
    expect(stream.status).toBe(401);
    await stream.body?.cancel();

    // A session started with the old token is a new visitor's; its token works.
    const res = await t.app.inject({
      method: 'POST',
      url: `/webchat/v1/${again.widget_key}/session`,
      headers: { origin: ORIGIN },
      payload: { token: oldToken },
    });
    expectStatus(res, 200);
    const session = res.json<{ token: string; visitor: { id: string } }>();
    const oldVisitor = JSON.parse(Buffer.from(oldToken.split('.')[1]!, 'base64url').toString()).v;
    expect(oldVisitor).toMatch(/^vis_/);
    expect(session.visitor.id).not.toBe(oldVisitor);
    expectStatus(await call('GET', 'messages', session.token), 200);
    const fresh = await openStream(base, again.widget_key, session.token);
    await fresh.close();
  });

  it('a rotated secret, verification off, ends an identified visitor’s stream (identify)', async () => {
    const { acc, c, visitor, reply } = await chatting({ identifier: 'user-rotated' });
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      await put(acc, { rotate_identity_secret: true });
      await expectEnded(stream, 'identify', reply);
    } finally {
      await stream.close();
    }
  });

  it('a rotated secret, verification required, ends an identified visitor’s stream (identify)', async () => {
    const { acc, c, visitor, reply } = await chatting({ identifier: 'user-required' });
    await put(acc, { identity_verification: 'required' });
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      await put(acc, { identity_verification: 'required', rotate_identity_secret: true });
      await expectEnded(stream, 'identify', reply);
    } finally {
      await stream.close();
    }
  });
});

describe('stream caps', () => {
  it('a visitor’s sixth stream ends the oldest (replaced); the others carry on', async () => {
    const { c, visitor, reply } = await chatting();
    const streams: Stream[] = [];
    try {
      for (let i = 0; i < 6; i++) {
        streams.push(await openStream(base, c.widget_key, visitor.token));
        await streams[i]!.untilMessage('hello?');
      }
      expect(await streams[0]!.endedWithin(1_000)).toBe(true);
      expect(streams[0]!.events().at(-1)).toMatchObject({
        event: 'end',
        data: '{"reason":"replaced"}',
      });
      await reply('to the five');
      for (const s of streams.slice(1)) await s.untilMessage('to the five');
      expect(streams[0]!.text()).not.toContain('to the five');
    } finally {
      for (const s of streams) await s.close();
    }
  });

  it('a HEAD answers what a GET would, at once, and opens nothing', async () => {
    const { c, visitor, reply } = await chatting();
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      const url = `${base}/webchat/v1/${c.widget_key}/stream`;
      // More than the visitor's cap: had they opened streams, the one above would be replaced.
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${url}?token=${encodeURIComponent(visitor.token)}`, {
          method: 'HEAD',
          headers: { origin: ORIGIN },
          signal: AbortSignal.timeout(2_000),
        });
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      }
      const refused = await fetch(`${url}?token=forged`, {
        method: 'HEAD',
        headers: { origin: ORIGIN },
        signal: AbortSignal.timeout(2_000),
      });
      expect(refused.status).toBe(401);
      await reply('after the HEADs');
      await stream.untilMessage('after the HEADs');
      expect(stream.events().some((e) => e.event === 'end')).toBe(false);
    } finally {
      await stream.close();
    }
  });

  it('beyond the process’s cap a stream is a 503 with Retry-After', async () => {
    const small = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      webchatLimits: { perAddress: 1_000, perVisitor: 1_000, streamsPerProcess: 2 },
    });
    const streams: Stream[] = [];
    try {
      const at = await listen(small);
      const acc = await newAccount(small);
      const c = await connectWebchat(acc);
      const visitor = visitorOf(small, c);
      await visitor.start();
      for (let i = 0; i < 2; i++) streams.push(await openStream(at, c.widget_key, visitor.token));
      const res = await small.app.inject({
        method: 'GET',
        url: `/webchat/v1/${c.widget_key}/stream?token=${encodeURIComponent(visitor.token)}`,
        headers: { origin: ORIGIN },
      });
      expectError(res, 503);
      expect(res.json().error.code).toBe('unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      for (const s of streams) await s.close();
      await small.close();
    }
  });
});

describe('caps per account, per address, and in time', () => {
  it('one account filling its share leaves others theirs (503); one address gets a 429', async () => {
    const small = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      webchatLimits: {
        perAddress: 1_000,
        perVisitor: 1_000,
        streamsPerAccount: 2,
        streamsPerAddress: 3,
      },
    });
    const streams: Stream[] = [];
    try {
      const at = await listen(small);
      const newcomer = async () => {
        const c = await connectWebchat(await newAccount(small));
        const visitor = visitorOf(small, c);
        await visitor.start();
        return { c, visitor };
      };
      const streamOf = (v: { c: WebchatConnection; visitor: { token: string } }) =>
        small.app.inject({
          method: 'GET',
          url: `/webchat/v1/${v.c.widget_key}/stream?token=${encodeURIComponent(v.visitor.token)}`,
          headers: { origin: ORIGIN },
        });
      const a = await newcomer();
      // New visitors cost nothing: two of them fill account A's share.
      const a2 = { c: a.c, visitor: visitorOf(small, a.c) };
      await a2.visitor.start();
      streams.push(await openStream(at, a.c.widget_key, a.visitor.token));
      streams.push(await openStream(at, a.c.widget_key, a2.visitor.token));
      const a3 = { c: a.c, visitor: visitorOf(small, a.c) };
      await a3.visitor.start();
      const full = await streamOf(a3);
      expectError(full, 503);
      expect(full.json().error.code).toBe('unavailable');
      expect(Number(full.headers['retry-after'])).toBeGreaterThan(0);

      // Account B's visitors still get theirs.
      const b = await newcomer();
      streams.push(await openStream(at, b.c.widget_key, b.visitor.token));

      // The address holds three streams, its most: a fourth, of any account, is a 429.
      const b2 = { c: b.c, visitor: visitorOf(small, b.c) };
      await b2.visitor.start();
      const over = await streamOf(b2);
      expectError(over, 429);
      expect(over.json().error.code).toBe('rate_limited');
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      expect(over.headers['access-control-allow-origin']).toBe(ORIGIN);

      // A stream closed gives its place back.
      await streams.shift()!.close();
      await eventually('a place freed', () => small.services.visitorStreams.size === 2);
      streams.push(await openStream(at, b.c.widget_key, b2.visitor.token));
    } finally {
      for (const s of streams) await s.close();
      await small.close();
    }
  });

  it('a stream past its lifetime ends without an `end` event (EventSource reconnects)', async () => {
    const brief = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      webchatLimits: { perAddress: 1_000, perVisitor: 1_000, streamLifetimeMs: 300 },
    });
    try {
      const at = await listen(brief);
      const c = await connectWebchat(await newAccount(brief));
      const visitor = visitorOf(brief, c);
      await visitor.start();
      const stream = await openStream(at, c.widget_key, visitor.token);
      try {
        expect(await stream.endedWithin(10_000)).toBe(true);
        expect(stream.events().map((e) => e.event)).toEqual(['ready']);
        expect(brief.services.visitorStreams.size).toBe(0);
      } finally {
        await stream.close();
      }
    } finally {
      await brief.close();
    }
  });
});

describe('a client that does not read', () => {
  it('has its stream dropped once what it left unread passes the cap, not held in memory', async () => {
    const capped = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      webchatLimits: { perAddress: 1_000, perVisitor: 1_000, maxBufferedBytes: 64 * 1024 },
    });
    standInForIdentities(capped.services);
    try {
      const at = await listen(capped);
      const acc = await newAccount(capped);
      const c = await connectWebchat(acc);
      const visitor = visitorOf(capped, c);
      await visitor.start();
      await visitor.send('hello?');
      const raw = connect(Number(new URL(at).port), '127.0.0.1');
      let seen = '';
      raw.on('data', (chunk: Buffer) => (seen += chunk.toString()));
      raw.write(
        `GET /webchat/v1/${c.widget_key}/stream?token=${encodeURIComponent(visitor.token)} HTTP/1.1\r\n` +
          `Host: 127.0.0.1\r\nOrigin: ${ORIGIN}\r\n\r\n`,
      );
      try {
        await eventually('the first message', () => seen.includes('hello?'));
        // From here on the client reads nothing.
        raw.pause();
        expect(capped.services.visitorStreams.size).toBe(1);
        // 500 messages of 4,096 control characters: about 24 KB each once escaped in JSON.
        await storeMessages(capped, acc, 500, '\u0001'.repeat(4096), new Date());
        await visitor.send('wake up');
        await eventually('the stream dropped', () => capped.services.visitorStreams.size === 0);
      } finally {
        raw.destroy();
      }
    } finally {
      await capped.close();
    }
  });
});

describe('keep-alive', () => {
  it('an open stream sends `event: ping` with data {}, not a comment', async () => {
    const quick = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      webchatLimits: { perAddress: 1_000, perVisitor: 1_000, pingMs: 100 },
    });
    try {
      const at = await listen(quick);
      const acc = await newAccount(quick);
      const c = await connectWebchat(acc);
      const visitor = visitorOf(quick, c);
      await visitor.start();
      const stream = await openStream(at, c.widget_key, visitor.token);
      try {
        await stream.until('two pings', () => stream.text().split('event: ping\n').length > 2);
        expect(stream.text()).toContain('event: ping\ndata: {}\n\n');
        expect(stream.text()).not.toContain(': keep-alive');
      } finally {
        await stream.close();
      }
    } finally {
      await quick.close();
    }
  });
});

describe('shutdown', () => {
  it('app.close() with an open widget stream completes at once, ending the stream bare', async () => {
    const closing = await startTestApp({ config: { secretsKey: SECRETS_KEY } });
    const at = await listen(closing);
    const acc = await newAccount(closing);
    const c = await connectWebchat(acc);
    const visitor = visitorOf(closing, c);
    await visitor.start();
    const stream = await openStream(at, c.widget_key, visitor.token);
    await stream.until('ready', () => stream.events().some((e) => e.event === 'ready'));
    const started = Date.now();
    await closing.close();
    // Generous: an open stream that held close() up would hold it for good (a slow machine only
    // takes longer).
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await stream.endedWithin(10_000)).toBe(true);
    // No `end` event: the widget reconnects (to another process).
    expect(stream.events().some((e) => e.event === 'end')).toBe(false);
  });
});

describe('resuming', () => {
  it('a Last-Event-ID that names no real instant is a 422 in the envelope', async () => {
    const { c, visitor } = await chatting();
    for (const id of ['2024-02-30T00:00:00Z', '-271821-04-20T00:00:00Z', 'yesterday']) {
      const res = await t.app.inject({
        method: 'GET',
        url: `/webchat/v1/${c.widget_key}/stream?token=${encodeURIComponent(visitor.token)}`,
        headers: { origin: ORIGIN, 'last-event-id': id },
      });
      expectError(res, 422);
      expect(res.json().error).toMatchObject({
        code: 'validation_error',
        details: [{ field: 'Last-Event-ID', issue: 'must be a date-time' }],
      });
    }
  });

  it('more messages than a page within the overlap window do not hold the stream', async () => {
    const { acc, c, visitor, reply } = await chatting();
    const stream = await openStream(base, c.widget_key, visitor.token);
    try {
      await stream.untilMessage('hello?');
      // 250 within one second (more than one read's page), stored without a wake-up…
      await storeMessages(t, acc, 250, 'stored', new Date(Date.now() - 1_000));
      // …then one more, which wakes the stream.
      await reply('the last one');
      await stream.untilMessage('the last one', 10_000);
      expect(stream.messages().filter((m) => m.content === 'stored')).toHaveLength(250);
      expect(new Set(stream.messages().map((m) => m.id)).size).toBe(stream.messages().length);
      const lastId = lastMessageId(stream);
      await stream.close();

      // A resume that missed more than a page gets all of it, with no further message.
      await storeMessages(t, acc, 250, 'missed', new Date(Date.parse(lastId) + 1), 'missed');
      const resumed = await openStream(base, c.widget_key, visitor.token, { lastEventId: lastId });
      try {
        await resumed.until(
          'every missed message',
          () => resumed.messages().filter((m) => m.content === 'missed').length === 250,
          10_000,
        );
      } finally {
        await resumed.close();
      }
    } finally {
      await stream.close();
    }
  });

  it('reconnecting with Last-Event-ID gets every message sent while away', async () => {
    const { c, visitor, reply } = await chatting();
    const first = await openStream(base, c.widget_key, visitor.token);
    await first.untilMessage('hello?');
    await reply('seen live');
    await first.untilMessage('seen live');
    const lastId = lastMessageId(first);
    await first.close();

    await reply('missed one');
    await visitor.send('from another tab');
    await reply('missed two');

    const resumed = await openStream(base, c.widget_key, visitor.token, { lastEventId: lastId });
    try {
      await resumed.untilMessage('missed two');
      const contents = resumed.messages().map((m) => m.content);
      // Every missed message, in order; what precedes them is the overlap the widget drops by id.
      expect(contents.slice(-3)).toEqual(['missed one', 'from another tab', 'missed two']);
      expect(contents.filter((x) => !['hello?', 'seen live'].includes(x))).toHaveLength(3);
      // Each event's id is its message's creation time, which the next resume starts from.
      for (const m of resumed.messages()) expect(Date.parse(m.eventId)).toBeGreaterThan(0);
      expect(new Set(resumed.messages().map((m) => m.id)).size).toBe(resumed.messages().length);
    } finally {
      await resumed.close();
    }

    // `since`, as the widget passes it on its own reconnection, resumes the same way.
    const bySince = await openStream(base, c.widget_key, visitor.token, { since: lastId });
    try {
      await bySince.untilMessage('missed two');
      expect(bySince.messages().map((m) => m.content)).toEqual(
        expect.arrayContaining(['missed one', 'from another tab', 'missed two']),
      );
    } finally {
      await bySince.close();
    }
  });

  it('a reply stored by a process whose clock is 20 s behind reaches open and resumed streams', async () => {
    const behind = await startTestApp({ config: { secretsKey: SECRETS_KEY } });
    try {
      standInForIdentities(behind.services);
      behind.clock.advance(-20_000);
      const { acc, c, visitor, reply } = await chatting();
      const stream = await openStream(base, c.widget_key, visitor.token);
      await stream.untilMessage('hello?');
      await reply('on time');
      await stream.untilMessage('on time');
      // Created "20 s before" the newest message the stream has sent.
      await reply('from the slow clock', through(behind, acc));
      await stream.untilMessage('from the slow clock');
      await reply('on time again');
      await stream.untilMessage('on time again');
      const lastId = lastMessageId(stream);
      await stream.close();

      await reply('slow again', through(behind, acc));
      const resumed = await openStream(base, c.widget_key, visitor.token, {
        lastEventId: lastId,
      });
      try {
        await resumed.untilMessage('slow again');
      } finally {
        await resumed.close();
      }
    } finally {
      await behind.close();
    }
  });
});
