import { sql } from 'kysely';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRateLimiter } from '../../src/http/rate-limiter.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { eventsOf, expectError, expectStatus } from '../inbox-helpers.js';
import {
  connectWebchat,
  identifierHash,
  ORIGIN,
  SECRETS_KEY,
  standInForIdentities,
  type WebchatConnection,
  putWebchat,
} from './webchat-helpers.js';

let t: TestApp;
let identities = false;
beforeAll(async () => {
  t = await startTestApp({
    config: { secretsKey: SECRETS_KEY },
    webchatLimits: { perAddress: 100_000, perVisitor: 100_000 },
  });
  identities = standInForIdentities(t.services);
});
afterAll(() => t.close());

/** The visitor identifies as `identifier`, with the hash the connection's secret makes. */
async function identifyAs(
  visitor: ReturnType<typeof visitorOf>,
  c: WebchatConnection,
  identifier: string,
): Promise<void> {
  expectStatus(
    await visitor.call('POST', 'identify', {
      identifier,
      identifier_hash: identifierHash(c.identity_secret, identifier),
    }),
    200,
  );
}

/** A visitor's calls, from the allowed origin unless told otherwise. */
function visitorOf(app: TestApp, c: WebchatConnection) {
  let token: string | undefined;
  const call = (
    method: 'GET' | 'POST' | 'OPTIONS',
    path: string,
    payload?: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.app.inject({
      method,
      url: `/webchat/v1/${c.widget_key}/${path}`,
      headers: {
        origin: ORIGIN,
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
  return {
    call,
    get token() {
      return token;
    },
    set token(v) {
      token = v;
    },
    async start(given?: string) {
      const res = await call('POST', 'session', given ? { token: given } : {});
      expectStatus(res, 200);
      token = res.json().token;
      return res.json();
    },
    async send(content: string, clientId = `c_${Math.random().toString(36).slice(2, 12)}`) {
      return call('POST', 'messages', { client_id: clientId, content });
    },
  };
}

async function webchatAccount(over: Record<string, unknown> = {}) {
  const acc = await newAccount(t);
  const c = await connectWebchat(acc, over);
  return { acc, c, visitor: visitorOf(t, c) };
}

/** The conversation of the account's `index`-th `message.received` event. */
async function receivedConversation(acc: TestAccount, index: number): Promise<string> {
  const received = await eventsOf(t.db, acc.accountId, 'message.received');
  return (received[index]!.data as { conversation_id: string }).conversation_id;
}

async function contactOf(acc: TestAccount, conversationId: string): Promise<string> {
  const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}` });
  return conv.json().contact_id;
}

describe('visitor sessions and tokens', () => {
  it('starts a visitor, resumes it with its token, and shows the widget settings', async () => {
    const { visitor } = await webchatAccount();
    const s = await visitor.start();
    expect(s).toMatchObject({
      visitor: { id: expect.stringMatching(/^vis_/), identified: false },
      widget: {
        title: 'Shop support',
        greeting: 'Hi! How can we help?',
        color: '#2563eb',
        identity_verification: 'off',
      },
    });
    const again = await visitor.start(s.token);
    expect(again.visitor.id).toBe(s.visitor.id);
  });

  it('a forged or altered token is refused, and starts a new visitor at the session', async () => {
    const { visitor } = await webchatAccount();
    const s = await visitor.start();
    const [v, body, mac] = (s.token as string).split('.');
    const claim = JSON.parse(Buffer.from(body!, 'base64url').toString());
    const altered = `${v}.${Buffer.from(JSON.stringify({ ...claim, v: 'vis_someone' })).toString('base64url')}.${mac}`;
    visitor.token = altered;
    expectError(await visitor.call('GET', 'messages'), 401);
    visitor.token = 'v1.e30.AAAA';
    expectError(await visitor.call('GET', 'messages'), 401);
    visitor.token = undefined;
    const fresh = await visitor.start(altered);
    expect(fresh.visitor.id).not.toBe(s.visitor.id);
  });

  it("a token of one account is refused on another account's widget", async () => {
    const a = await webchatAccount();
    const b = await webchatAccount();
    const s = await a.visitor.start();
    expect((await a.visitor.send('mine')).statusCode).toBe(201);
    b.visitor.token = s.token;
    expectError(await b.visitor.call('GET', 'messages'), 401);
    expectError(await b.visitor.send('hello'), 401);
    const resumed = await b.visitor.start(s.token);
    expect(resumed.visitor.id).not.toBe(s.visitor.id);
  });

  it('an unknown widget key is a 404 the page can read (the widget stops on it)', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/webchat/v1/wk_01ARZ3NDEKTSV4RRFFQ69G5FAV_AAAAAAAAAAAAAAAA/session',
      headers: { origin: ORIGIN },
      payload: {},
    });
    expectError(res, 404);
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });
});

describe('CORS', () => {
  it('answers the allowed origin, preflight included, and refuses any other', async () => {
    const { visitor } = await webchatAccount();
    const pre = await visitor.call('OPTIONS', 'messages?since=2024-01-01T00:00:00Z', undefined, {
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    });
    expect(pre.statusCode).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(String(pre.headers['access-control-allow-headers'])).toMatch(/Authorization/);

    const s = await visitor.call('POST', 'session', {});
    expect(s.headers['access-control-allow-origin']).toBe(ORIGIN);

    // Another origin's preflight passes, so that its request meets the 403, readable by the
    // page (`*`: no credentials ride here) so that the widget can say what to change.
    for (const origin of ['https://evil.example', 'http://shop.example', 'null']) {
      const other = await visitor.call('OPTIONS', 'session', undefined, { origin });
      expect(other.statusCode).toBe(204);
      expect(other.headers['access-control-allow-origin']).toBe('*');
      const post = await visitor.call('POST', 'session', {}, { origin });
      expectError(post, 403);
      expect(post.headers['access-control-allow-origin']).toBe('*');
      const message = post.json<{ error: { message: string } }>().error.message;
      expect(message).toContain(`${origin} is not one`);
      expect(message).toContain('allowed_origins');
      const read = await visitor.call('GET', 'messages', undefined, { origin });
      expectError(read, 403);
    }
    const none = await t.app.inject({
      method: 'POST',
      url: `/webchat/v1/${(await webchatAccount()).c.widget_key}/session`,
      payload: {},
    });
    expectError(none, 403);
  });
});

describe('the conversation', () => {
  it('a visitor message is an inbound webchat message; the first makes the contact', async () => {
    const { acc, visitor } = await webchatAccount();
    await visitor.start();
    const res = await visitor.send('Hello there', 'client-0001');
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({
      author: 'visitor',
      client_id: 'client-0001',
      content: 'Hello there',
      type: 'text',
    });
    const events = await eventsOf(t.db, acc.accountId, 'message.received');
    expect(events).toHaveLength(1);
    const m = events[0]!.data as { conversation_id: string; direction: string };
    expect(m.direction).toBe('inbound');
    const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${m.conversation_id}` });
    expect(conv.json().channel).toBe('webchat');
    if (identities) {
      const contact = await acc.call({
        method: 'GET',
        url: `/v1/contacts/${conv.json().contact_id}`,
      });
      expect(contact.json()).toMatchObject({
        phone: null,
        identities: [{ channel: 'webchat', id: expect.stringMatching(/^vis_/) }],
      });
    }
  });

  it('the same client_id again returns the first message and records nothing more', async () => {
    const { acc, visitor } = await webchatAccount();
    await visitor.start();
    const first = await visitor.send('once', 'retry-me-123');
    const second = await visitor.send('once', 'retry-me-123');
    expectStatus(second, 201);
    expect(second.json().id).toBe(first.json().id);
    expect(await eventsOf(t.db, acc.accountId, 'message.received')).toHaveLength(1);
    const list = await visitor.call('GET', 'messages');
    expect(list.json().data).toHaveLength(1);
  });

  it("lists the visitor's messages and the team's replies, never notes or another visitor's", async () => {
    const { acc, c, visitor } = await webchatAccount();
    await visitor.start();
    const mine = await visitor.send('question');
    const conversationId = await receivedConversation(acc, 0);
    const contactId = await contactOf(acc, conversationId);
    const reply = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contactId, channel: 'webchat', type: 'text', content: 'answer' },
    });
    expectStatus(reply, 201);
    expect(reply.json().status).toBe('sent');
    const note = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${conversationId}/notes`,
      payload: { content: 'INTERNAL: refund fraud?' },
    });
    expectStatus(note, 201);

    const other = visitorOf(t, c);
    await other.start();
    await other.send('another visitor');

    const list = await visitor.call('GET', 'messages');
    expectStatus(list, 200);
    expect(
      list.json().data.map((m: { author: string; content: string }) => [m.author, m.content]),
    ).toEqual([
      ['visitor', 'question'],
      ['team', 'answer'],
    ]);
    expect(list.body).not.toContain('INTERNAL');
    expect(list.json().data[0].id).toBe(mine.json().id);
    const theirs = await other.call('GET', 'messages');
    expect(theirs.json().data.map((m: { content: string }) => m.content)).toEqual([
      'another visitor',
    ]);

    // Receipts move the reply forward once each, with events; another's ids are ignored.
    const ack = await visitor.call('POST', 'receipts', {
      status: 'delivered',
      message_ids: [reply.json().id],
    });
    expectStatus(ack, 200);
    const seen = await visitor.call('POST', 'receipts', {
      status: 'read',
      message_ids: [reply.json().id, reply.json().id],
    });
    expectStatus(seen, 200);
    const theirAck = await other.call('POST', 'receipts', {
      status: 'read',
      message_ids: [mine.json().id, reply.json().id],
    });
    expectStatus(theirAck, 200);
    const types = (await eventsOf(t.db, acc.accountId))
      .filter((e) => (e.data as { id: string }).id === reply.json().id)
      .map((e) => e.type);
    expect(types).toEqual(['message.created', 'message.delivered', 'message.read']);
  });

  it('a visitor whose contact the team merged into another, then deleted, carries on', async () => {
    const { acc, visitor } = await webchatAccount();
    await visitor.start();
    expectStatus(await visitor.send('first'), 201);
    const [first] = await eventsOf(t.db, acc.accountId, 'message.received');
    const conversationId = (first!.data as { conversation_id: string }).conversation_id;
    const anonymous = await contactOf(acc, conversationId);
    const known = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: '+14155550111', name: 'Known on WhatsApp' },
    });
    expectStatus(known, 201);
    const knownId = known.json().id as string;
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/contacts/${knownId}/merge`,
        payload: { contact_id: anonymous },
      }),
      200,
    );

    // The visitor now speaks as the merged contact: same conversation, both ways.
    const contents = async () =>
      (await visitor.call('GET', 'messages'))
        .json()
        .data.map((m: { content: string }) => m.content);
    expect(await contents()).toEqual(['first']);
    expectStatus(await visitor.send('second'), 201);
    const received = await eventsOf(t.db, acc.accountId, 'message.received');
    expect((received[1]!.data as { conversation_id: string }).conversation_id).toBe(conversationId);
    expect(await contactOf(acc, conversationId)).toBe(knownId);
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: knownId, channel: 'webchat', type: 'text', content: 'reply' },
      }),
      201,
    );
    expect(await contents()).toEqual(['first', 'second', 'reply']);

    // Deleted (an erasure request): the visitor sees nothing of it, and writing starts afresh.
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/contacts/${knownId}` }), 200);
    expect(await contents()).toEqual([]);
    expectStatus(await visitor.send('after the erasure'), 201);
    expect(await contents()).toEqual(['after the erasure']);
    const latest = (await eventsOf(t.db, acc.accountId, 'message.received')).at(-1)!;
    const fresh = await contactOf(
      acc,
      (latest.data as { conversation_id: string }).conversation_id,
    );
    expect(fresh).not.toBe(knownId);
    expect(
      (await acc.call({ method: 'GET', url: `/v1/contacts/${fresh}` })).json().identities,
    ).toEqual([{ channel: 'webchat', id: expect.stringMatching(/^vis_/) }]);
  });

  it('bad input is a 4xx in the error envelope', async () => {
    const { visitor } = await webchatAccount();
    await visitor.start();
    expectError(await visitor.send(''), 422);
    expectError(await visitor.send('x'.repeat(4097)), 422);
    expectError(await visitor.call('POST', 'messages', { content: 'no client id' }), 422);
    expectError(await visitor.call('POST', 'messages', { client_id: 'short', content: 'x' }), 422);
    expectError(
      await visitor.call('POST', 'messages', { client_id: 'abcdefgh12', content: 'a\u0000b' }),
      422,
    );
    expectError(
      await visitor.call('POST', 'messages', { client_id: 'abcdefgh12', content: 'x', extra: 1 }),
      422,
    );
    expectError(await visitor.call('GET', 'messages?since=yesterday'), 422);
    expectError(await visitor.call('GET', 'messages?page=2'), 422);
    expectError(await visitor.call('POST', 'receipts', { status: 'read', message_ids: [] }), 422);
    expectError(
      await visitor.call('POST', 'identify', { identifier: 'u', identifier_hash: 'zz' }),
      422,
    );
    const notJson = await visitor.call('POST', 'messages', 'plain text', {
      'content-type': 'text/plain',
    });
    expect(notJson.statusCode).toBeGreaterThanOrEqual(400);
    expect(notJson.statusCode).toBeLessThan(500);
    expect(notJson.json().error.code).toBeDefined();
  });

  it('a message of whitespace alone is a 422 and records nothing', async () => {
    const { acc, visitor } = await webchatAccount();
    await visitor.start();
    for (const blank of [' ', '\n\t \r\n', '\u00a0\u2003']) {
      const res = await visitor.send(blank);
      expectError(res, 422, 'content');
    }
    expect(await eventsOf(t.db, acc.accountId, 'message.received')).toHaveLength(0);
    expect((await visitor.call('GET', 'messages')).json().data).toEqual([]);
    // Text with whitespace around it is still a message.
    expectStatus(await visitor.send('  hi  '), 201);
  });
});

describe('identity', () => {
  it('required: an unverified visitor can neither read nor write, on every endpoint', async () => {
    const { acc, visitor } = await webchatAccount({ identity_verification: 'required' });
    const s = await visitor.start();
    expect(s.widget.identity_verification).toBe('required');
    expectError(await visitor.call('GET', 'messages'), 403);
    expectError(await visitor.send('let me in'), 403);
    expectError(
      await visitor.call('POST', 'receipts', { status: 'read', message_ids: ['msg_x'] }),
      403,
    );
    expectError(await visitor.call('GET', `stream?token=${encodeURIComponent(s.token)}`), 403);
    expect(await eventsOf(t.db, acc.accountId, 'message.received')).toEqual([]);
  });

  it('a valid hash identifies the visitor; a wrong one is refused; history follows to another device', async () => {
    const { acc, c, visitor } = await webchatAccount({ identity_verification: 'required' });
    await visitor.start();
    expectError(
      await visitor.call('POST', 'identify', {
        identifier: 'user-7',
        identifier_hash: identifierHash(c.identity_secret, 'user-8'),
      }),
      403,
    );
    expectError(
      await visitor.call('POST', 'identify', {
        identifier: 'user-7',
        identifier_hash: identifierHash('wcs_not-the-secret', 'user-7'),
      }),
      403,
    );
    const ok = await visitor.call('POST', 'identify', {
      identifier: 'user-7',
      identifier_hash: identifierHash(c.identity_secret, 'user-7').toUpperCase(),
      name: 'Grace',
      email: 'grace@example.com',
    });
    expectStatus(ok, 200);
    expect(ok.json().visitor.identified).toBe(true);
    expectStatus(await visitor.send('from my laptop'), 201);

    const phone = visitorOf(t, c);
    await phone.start();
    expectError(await phone.call('GET', 'messages'), 403);
    expectStatus(
      await phone.call('POST', 'identify', {
        identifier: 'user-7',
        identifier_hash: identifierHash(c.identity_secret, 'user-7'),
      }),
      200,
    );
    const list = await phone.call('GET', 'messages');
    expect(list.json().data.map((m: { content: string }) => m.content)).toEqual(['from my laptop']);
    const received = await eventsOf(t.db, acc.accountId, 'message.received');
    const contact = await acc.call({
      method: 'GET',
      url: `/v1/contacts/${await contactOf(acc, (received[0]!.data as { conversation_id: string }).conversation_id)}`,
    });
    expect(contact.json()).toMatchObject({ name: 'Grace', email: 'grace@example.com' });
    if (identities)
      expect(contact.json().identities).toEqual([{ channel: 'webchat', id: 'user-7' }]);
  });

  it('an anonymous visitor who wrote keeps it on identifying: as someone new, their contact becomes them; as someone known, it is folded in', async () => {
    const { acc, c, visitor } = await webchatAccount();
    await visitor.start();
    expectStatus(await visitor.send('asked before logging in'), 201);
    const [first] = await eventsOf(t.db, acc.accountId, 'message.received');
    const conversationId = (first!.data as { conversation_id: string }).conversation_id;
    const contactId = await contactOf(acc, conversationId);

    const identify = (v: ReturnType<typeof visitorOf>, identifier: string) =>
      v.call('POST', 'identify', {
        identifier,
        identifier_hash: identifierHash(c.identity_secret, identifier),
        name: 'Ada',
      });
    expectStatus(await identify(visitor, 'user-99'), 200);
    const history = await visitor.call('GET', 'messages');
    expect(history.json().data.map((m: { content: string }) => m.content)).toEqual([
      'asked before logging in',
    ]);
    expectStatus(await visitor.send('and now logged in'), 201);
    const received = await eventsOf(t.db, acc.accountId, 'message.received');
    expect(received.map((e) => (e.data as { conversation_id: string }).conversation_id)).toEqual([
      conversationId,
      conversationId,
    ]);
    // One contact, now known by the identifier (and named), not a second one.
    const contacts = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(contacts.json().data.map((x: { id: string }) => x.id)).toEqual([contactId]);
    const contact = await acc.call({ method: 'GET', url: `/v1/contacts/${contactId}` });
    expect(contact.json()).toMatchObject({
      name: 'Ada',
      identities: [{ channel: 'webchat', id: 'user-99' }],
    });
    // The team's reply reaches the identified visitor, on this device and on another.
    const reply = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contactId, channel: 'webchat', type: 'text', content: 'welcome back' },
    });
    expectStatus(reply, 201);
    const laptop = visitorOf(t, c);
    await laptop.start();
    expectStatus(await identify(laptop, 'user-99'), 200);
    const seen = await laptop.call('GET', 'messages');
    expect(seen.json().data.map((m: { content: string }) => m.content)).toEqual([
      'asked before logging in',
      'and now logged in',
      'welcome back',
    ]);

    // Someone known already: what an anonymous visitor wrote is folded into their conversation,
    // and the anonymous contact into theirs.
    const tablet = visitorOf(t, c);
    await tablet.start();
    expectStatus(await tablet.send('anonymous on a tablet'), 201);
    const tabletConversation = await receivedConversation(acc, 2);
    const tabletContact = await contactOf(acc, tabletConversation);
    expect(tabletContact).not.toBe(contactId);
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/conversations/${tabletConversation}/notes`,
        payload: { content: 'asked about the tablet order' },
      }),
      201,
    );
    // The user's conversation was resolved; the question asked anonymously keeps it open.
    expectStatus(
      await acc.call({ method: 'POST', url: `/v1/conversations/${conversationId}/resolve` }),
      200,
    );
    expectStatus(await identify(tablet, 'user-99'), 200);
    const all = [
      'asked before logging in',
      'and now logged in',
      'welcome back',
      'anonymous on a tablet',
    ];
    const onTablet = await tablet.call('GET', 'messages');
    expect(onTablet.json().data.map((m: { content: string }) => m.content)).toEqual(all);
    const contactsNow = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(contactsNow.json().data.map((x: { id: string }) => x.id)).toEqual([contactId]);
    expectError(await acc.call({ method: 'GET', url: `/v1/contacts/${tabletContact}` }), 404);
    const conversation = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${conversationId}`,
    });
    expect(conversation.json().messages.map((m: { content: string }) => m.content)).toEqual(all);
    expect(conversation.json().status).toBe('open');
    const notes = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${conversationId}/notes`,
    });
    expect(notes.json().data.map((n: { content: string }) => n.content)).toEqual([
      'asked about the tablet order',
    ]);
    expectError(
      await acc.call({ method: 'GET', url: `/v1/conversations/${tabletConversation}` }),
      404,
    );
    expect(
      (await acc.call({ method: 'GET', url: `/v1/contacts/${contactId}` })).json().identities,
    ).toEqual([{ channel: 'webchat', id: 'user-99' }]);

    // Two contacts that cannot be merged (both have a phone): the visitor is linked to the
    // known one, and what they wrote anonymously stays on its own contact, in the inbox.
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${contactId}`,
        payload: { phone: '+14155550101' },
      }),
      200,
    );
    const kiosk = visitorOf(t, c);
    await kiosk.start();
    expectStatus(await kiosk.send('anonymous at a kiosk'), 201);
    const kioskContact = await contactOf(acc, await receivedConversation(acc, 3));
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${kioskContact}`,
        payload: { phone: '+14155550102' },
      }),
      200,
    );
    expectStatus(await identify(kiosk, 'user-99'), 200);
    const onKiosk = await kiosk.call('GET', 'messages');
    expect(onKiosk.json().data.map((m: { content: string }) => m.content)).toEqual(all);
    const kept = await acc.call({ method: 'GET', url: `/v1/contacts/${kioskContact}` });
    expectStatus(kept, 200);
    expect(kept.json().identities).toHaveLength(2);
    expect(kept.json().identities).toEqual(
      expect.arrayContaining([
        { channel: 'whatsapp', id: '+14155550102' },
        { channel: 'webchat', id: expect.stringMatching(/^vis_/) },
      ]),
    );
  });

  it('an identify cut short (identifier recorded, nothing folded yet) is completed by the next one', async () => {
    const { acc, c, visitor } = await webchatAccount();
    const s = await visitor.start();
    expectStatus(await visitor.send('written anonymously'), 201);
    // As if the process died right after recording the identifier (vouched for by the
    // connection's secret): another tab writes then.
    await t.db
      .updateTable('webchat_visitors')
      .set({
        identifier: 'user-5',
        vouched_by: sql<Buffer>`(SELECT sha256(secrets) FROM channel_connections
          WHERE account_id = ${acc.accountId} AND channel = 'webchat')`,
      })
      .where('account_id', '=', acc.accountId)
      .where('id', '=', s.visitor.id)
      .execute();
    expectStatus(await visitor.send('from another tab meanwhile'), 201);
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).json().data).toHaveLength(2);
    await identifyAs(visitor, c, 'user-5');
    const list = await visitor.call('GET', 'messages');
    expect(list.json().data.map((m: { content: string }) => m.content)).toEqual([
      'written anonymously',
      'from another tab meanwhile',
    ]);
    const contacts = (await acc.call({ method: 'GET', url: '/v1/contacts' })).json().data;
    expect(contacts).toHaveLength(1);
    expect(contacts[0].identities).toEqual([{ channel: 'webchat', id: 'user-5' }]);
  });

  it('a rotated secret stops verifying the old hashes', async () => {
    const { acc, c, visitor } = await webchatAccount();
    await visitor.start();
    const rotated = await acc.call({
      method: 'PUT',
      url: '/v1/channels/webchat',
      payload: {
        provider: 'webchat',
        allowed_origins: [ORIGIN],
        identity_verification: 'off',
        rotate_identity_secret: true,
      },
    });
    const fresh = rotated.json().identity_secret as string;
    expectError(
      await visitor.call('POST', 'identify', {
        identifier: 'u1',
        identifier_hash: identifierHash(c.identity_secret, 'u1'),
      }),
      403,
    );
    expectStatus(
      await visitor.call('POST', 'identify', {
        identifier: 'u1',
        identifier_hash: identifierHash(fresh, 'u1'),
      }),
      200,
    );
  });
  it('a rotated secret ends what the old one vouched for: identified visitors must identify again', async () => {
    const settings = { identity_verification: 'required' };
    const { acc, c, visitor } = await webchatAccount(settings);
    const other = await webchatAccount(settings); // another account's visitors are not touched
    const identify = (v: typeof visitor, secret: string, who: string) =>
      v.call('POST', 'identify', { identifier: who, identifier_hash: identifierHash(secret, who) });
    await visitor.start();
    expectStatus(await identify(visitor, c.identity_secret, 'user-9'), 200);
    expectStatus(await visitor.send('before the rotation'), 201);
    await other.visitor.start();
    expectStatus(await identify(other.visitor, other.c.identity_secret, 'user-9'), 200);

    const rotated = await acc.call({
      method: 'PUT',
      url: '/v1/channels/webchat',
      payload: {
        provider: 'webchat',
        allowed_origins: [ORIGIN],
        ...settings,
        rotate_identity_secret: true,
      },
    });
    expectStatus(rotated, 200);
    const fresh = rotated.json().identity_secret as string;

    // Same token, same visitor: no longer identified, so refused everywhere until it is again.
    const resumed = await visitor.start(visitor.token);
    expect(resumed.visitor.identified).toBe(false);
    expectError(await visitor.call('GET', 'messages'), 403);
    expectError(await visitor.send('after the rotation'), 403);
    expectError(await identify(visitor, c.identity_secret, 'user-9'), 403);
    expectStatus(await identify(visitor, fresh, 'user-9'), 200);
    const list = await visitor.call('GET', 'messages');
    expect(list.json().data.map((m: { content: string }) => m.content)).toEqual([
      'before the rotation',
    ]);
    expectStatus(await other.visitor.call('GET', 'messages'), 200);
  });

  it('a rotation ends identifications at its commit: one the clearing after it has not reached yet counts for nothing', async () => {
    const settings = { identity_verification: 'required' };
    const { acc, c, visitor } = await webchatAccount(settings);
    const s = await visitor.start();
    await identifyAs(visitor, c, 'user-12');
    const before = await t.db
      .selectFrom('webchat_visitors')
      .select(['identifier', 'vouched_by'])
      .where('account_id', '=', acc.accountId)
      .where('id', '=', s.visitor.id)
      .executeTakeFirstOrThrow();
    expect(before.identifier).toBe('user-12');
    await putWebchat(acc, { ...settings, rotate_identity_secret: true });
    // As if the clearing after the rotation had failed or not reached this visitor yet.
    await t.db
      .updateTable('webchat_visitors')
      .set(before)
      .where('account_id', '=', acc.accountId)
      .where('id', '=', s.visitor.id)
      .execute();
    const resumed = await visitor.start(visitor.token);
    expect(resumed.visitor.identified).toBe(false);
    expectError(await visitor.call('GET', 'messages'), 403);
    expectError(await visitor.send('after the rotation'), 403);
  });

  it('an identify checked against the old secret while a rotation commits is refused, never kept', async () => {
    const { acc, c, visitor } = await webchatAccount();
    await visitor.start();
    let identifying: ReturnType<typeof visitor.call> | undefined;
    // A rotation under way: the connection's secret replaced, not yet committed. The identify
    // read the old one, and its hash of the old secret checks out against it.
    await t.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('channel_connections')
        .set({ secrets: Buffer.from('another sealed secret') })
        .where('account_id', '=', acc.accountId)
        .where('channel', '=', 'webchat')
        .execute();
      identifying = visitor.call('POST', 'identify', {
        identifier: 'user-12',
        identifier_hash: identifierHash(c.identity_secret, 'user-12'),
      });
      // Its recording waits for the rotation's lock on the connection row.
      for (let i = 0; ; i++) {
        const { rows } = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`.execute(t.db);
        if (rows[0]!.n > 0) break;
        if (i > 200) throw new Error('the identify never waited for the rotation');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    });
    expectError(await identifying!, 403);
    const stored = await t.db
      .selectFrom('webchat_visitors')
      .select('identifier')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(stored).toEqual([{ identifier: null }]);
  });

  it('with verification off, a visitor identified under a rotated secret is anonymous again', async () => {
    const { acc, c, visitor } = await webchatAccount();
    await visitor.start();
    await identifyAs(visitor, c, 'user-10');
    expectStatus(await visitor.send('as user-10'), 201);
    await putWebchat(acc, { rotate_identity_secret: true });
    expect((await visitor.start(visitor.token)).visitor.identified).toBe(false);
    // user-10's conversation is theirs, not this browser's, until it identifies again.
    expect((await visitor.call('GET', 'messages')).json().data).toEqual([]);
  });

  it('connecting webchat again after a DELETE makes a new secret, and ends the old tokens', async () => {
    const { acc, c, visitor } = await webchatAccount();
    const first = await visitor.start();
    await identifyAs(visitor, c, 'user-13');
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/webchat' }), 200);
    const again = await connectWebchat(acc);
    expect(again.identity_secret).not.toBe(c.identity_secret);
    const same = visitorOf(t, again);
    const started = await same.start(visitor.token);
    expect(started.visitor.id).not.toBe(first.visitor.id);
    expect(started.visitor.identified).toBe(false);
  });

  it('a change of settings that keeps the secret keeps every identification', async () => {
    const { acc, c, visitor } = await webchatAccount();
    await visitor.start();
    await identifyAs(visitor, c, 'user-11');
    await putWebchat(acc, { title: 'Renamed' });
    expect((await visitor.start(visitor.token)).visitor.identified).toBe(true);
  });
});

describe('rate limits', () => {
  it('per visitor and per address, with Retry-After', async () => {
    const limited = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      rateLimiter: new MemoryRateLimiter(),
      webchatLimits: { perAddress: 1000, perVisitor: 3 },
    });
    try {
      standInForIdentities(limited.services);
      const acc = await newAccount(limited);
      const c = await connectWebchat(acc);
      const v = visitorOf(limited, c);
      await v.start();
      for (let i = 0; i < 3; i++) expectStatus(await v.call('GET', 'messages'), 200);
      const over = await v.call('GET', 'messages');
      expectError(over, 429);
      expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(over.headers['access-control-allow-origin']).toBe(ORIGIN);
      // Another visitor has its own count.
      const w = visitorOf(limited, c);
      await w.start();
      expectStatus(await w.call('GET', 'messages'), 200);
    } finally {
      await limited.close();
    }

    const byAddress = await startTestApp({
      config: { secretsKey: SECRETS_KEY },
      rateLimiter: new MemoryRateLimiter(),
      webchatLimits: { perAddress: 2, perVisitor: 1000 },
    });
    try {
      const acc = await newAccount(byAddress);
      const c = await connectWebchat(acc);
      expectStatus(await visitorOf(byAddress, c).call('POST', 'session', {}), 200);
      expectStatus(await visitorOf(byAddress, c).call('POST', 'session', {}), 200);
      const over = await visitorOf(byAddress, c).call('POST', 'session', {});
      expectError(over, 429);
      expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      // Counted before the widget's origins are known: readable by any page, the widget's too.
      expect(over.headers['access-control-allow-origin']).toBe('*');
    } finally {
      await byAddress.close();
    }
  });

  it('behind a trusted proxy (TRUST_PROXY) the per-address limit counts each client, not the proxy', async () => {
    // The test requests come from 127.0.0.1, standing in for the load balancer.
    const trusted = async (trustProxy: false | string[]) => {
      const app = await startTestApp({
        config: { secretsKey: SECRETS_KEY, trustProxy },
        rateLimiter: new MemoryRateLimiter(),
        webchatLimits: { perAddress: 2, perVisitor: 1000 },
      });
      const acc = await newAccount(app);
      const c = await connectWebchat(acc);
      const session = (client: string) =>
        visitorOf(app, c).call('POST', 'session', {}, { 'x-forwarded-for': client });
      return { app, session };
    };
    const behind = await trusted(['127.0.0.1']);
    try {
      expectStatus(await behind.session('203.0.113.7'), 200);
      expectStatus(await behind.session('203.0.113.7'), 200);
      expectError(await behind.session('203.0.113.7'), 429);
      // Another client behind the same proxy has its own count.
      expectStatus(await behind.session('198.51.100.23'), 200);
    } finally {
      await behind.app.close();
    }
    // Without TRUST_PROXY, X-Forwarded-For is not believed: a client cannot escape its limit.
    const direct = await trusted(false);
    try {
      expectStatus(await direct.session('203.0.113.7'), 200);
      expectStatus(await direct.session('198.51.100.23'), 200);
      expectError(await direct.session('192.0.2.1'), 429);
    } finally {
      await direct.app.close();
    }
  });
});

/** A visitor's live stream, read as it arrives. */
async function openStream(base: string, widgetKey: string, token: string) {
  const abort = new AbortController();
  const res = await fetch(
    `${base}/webchat/v1/${widgetKey}/stream?token=${encodeURIComponent(token)}`,
    { headers: { origin: ORIGIN }, signal: abort.signal },
  );
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
  const reader = res.body!.getReader();
  let text = '';
  return {
    text: () => text,
    /** Waits until `needle` has arrived, at most `ms`. */
    async until(needle: string, ms: number) {
      const deadline = Date.now() + ms;
      while (!text.includes(needle)) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no "${needle}" within ${ms} ms: ${text}`);
        const chunk = await Promise.race([
          reader.read(),
          new Promise<null>((r) => setTimeout(() => r(null), left)),
        ]);
        if (chunk && !chunk.done) text += new TextDecoder().decode(chunk.value);
      }
    },
    async close() {
      abort.abort();
      await reader.cancel().catch(() => undefined);
    },
  };
}

/** The test app's own address, listening on a port (for fetch and its streams). */
async function listening(): Promise<string> {
  if (!t.app.server.listening) await t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

describe('the live stream', () => {
  it('a reply sent through another API process reaches the stream within a second', async () => {
    const other = await startTestApp({ config: { secretsKey: SECRETS_KEY } });
    try {
      standInForIdentities(other.services);
      const base = await listening();
      const { acc, c, visitor } = await webchatAccount();
      const s = await visitor.start();
      await visitor.send('hello?');
      const received = await eventsOf(t.db, acc.accountId, 'message.received');
      const conversationId = (received[0]!.data as { conversation_id: string }).conversation_id;
      const contactId = await contactOf(acc, conversationId);

      const stream = await openStream(base, c.widget_key, s.token);
      await stream.until('hello?', 2_000);

      // The reply goes through the other process (its own app, pool and feed).
      const otherAcc = {
        ...acc,
        call: (o: Parameters<TestAccount['call']>[0]) =>
          other.app.inject({
            ...o,
            headers: { authorization: `Bearer ${acc.apiKey}`, ...(o.headers ?? {}) },
          }),
      };
      const started = Date.now();
      const reply = await otherAcc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: {
          contact_id: contactId,
          channel: 'webchat',
          type: 'text',
          content: 'from process B',
        },
      });
      expectStatus(reply, 201);
      await stream.until('from process B', 1_000);
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(stream.text()).toMatch(/event: message\ndata: /);
      expect(stream.text()).not.toContain(s.token);
      await stream.close();
    } finally {
      await other.close();
    }
  });

  it('an open stream follows its visitor when the team merges their contact into another', async () => {
    const { acc, c, visitor } = await webchatAccount();
    const s = await visitor.start();
    await visitor.send('before the merge');
    const [first] = await eventsOf(t.db, acc.accountId, 'message.received');
    const anonymous = await contactOf(
      acc,
      (first!.data as { conversation_id: string }).conversation_id,
    );
    const stream = await openStream(await listening(), c.widget_key, s.token);
    try {
      await stream.until('before the merge', 2_000);
      const known = await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: '+14155550121' },
      });
      expectStatus(
        await acc.call({
          method: 'POST',
          url: `/v1/contacts/${known.json().id}/merge`,
          payload: { contact_id: anonymous },
        }),
        200,
      );
      expectStatus(
        await acc.call({
          method: 'POST',
          url: '/v1/messages/send',
          payload: {
            contact_id: known.json().id,
            channel: 'webchat',
            type: 'text',
            content: 'after the merge',
          },
        }),
        201,
      );
      await stream.until('after the merge', 2_000);
    } finally {
      await stream.close();
    }
  });
});
