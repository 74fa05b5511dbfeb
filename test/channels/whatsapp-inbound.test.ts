import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INBOUND_WAIT_DELAYS_MS, UNKNOWN_REPORT_WAITS } from '../../src/inbound/inbound.service.js';
import { toMessage } from '../../src/messages/messages.present.js';
import { newAccount, randomPhone, type TestAccount } from '../helpers.js';
import { eventsOf } from '../inbox-helpers.js';
import {
  inboundWebhook,
  postSignedWebhook,
  statusWebhook,
  templateStatusWebhook,
  waContact,
  waMessage,
  wamid,
  waStatus,
  whatsappWebhook,
} from '../fake-graph/webhooks.js';
import {
  connectWhatsApp,
  startInboundHarness,
  type InboundHarness,
  type WhatsAppConnection,
} from './inbound-harness.js';
import { insertOutbound } from './messages-sink.js';

let h: InboundHarness;
beforeAll(async () => {
  h = await startInboundHarness();
});
afterAll(() => h.close());

async function setup(): Promise<{ acc: TestAccount; conn: WhatsAppConnection }> {
  const acc = await newAccount(h.t);
  return { acc, conn: await connectWhatsApp(h, acc.accountId) };
}
const business = (conn: WhatsAppConnection) => ({
  phoneNumberId: conn.phoneNumberId,
  businessAccountId: conn.businessAccountId,
});
/** A sender's WhatsApp id: a phone's digits. */
const waIdOf = (phone: string) => phone.slice(1);

function post(conn: WhatsAppConnection, payload: Record<string, unknown> | string | Buffer) {
  return postSignedWebhook(conn.webhookUrl, payload, conn.appSecret);
}
async function storedWebhooks(accountId: string) {
  return h.t.db
    .selectFrom('inbound_webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute();
}
async function jobsOf(accountId: string) {
  return h.t.db
    .selectFrom('jobs')
    .select(['kind', 'payload', 'attempts', 'dead_at'])
    .where('account_id', '=', accountId)
    .execute();
}
async function inboundMessages(accountId: string) {
  return h.t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('direction', '=', 'inbound')
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}
async function messageByProviderId(accountId: string, providerMessageId: string) {
  return h.t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('provider_message_id', '=', providerMessageId)
    .executeTakeFirst();
}
async function deliver(
  acc: TestAccount,
  conn: WhatsAppConnection,
  payload: Record<string, unknown>,
) {
  const res = await post(conn, payload);
  expect(res.status).toBe(200);
  await h.drain(acc.accountId);
}

describe('GET /channels/{id}/webhook: the verification handshake', () => {
  const verify = (conn: { id: string }, query: Record<string, string | undefined>) =>
    h.app.inject({
      method: 'GET',
      url: `/channels/${conn.id}/webhook`,
      query: Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined)) as Record<
        string,
        string
      >,
    });

  it('answers the challenge as text/plain when the verify token matches', async () => {
    const { conn } = await setup();
    const res = await verify(conn, {
      'hub.mode': 'subscribe',
      'hub.verify_token': conn.verifyToken,
      'hub.challenge': '1158201444',
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body).toBe('1158201444');
  });

  it('is a 403 in the error envelope for a wrong token, another mode or missing parameters', async () => {
    const { conn } = await setup();
    for (const query of [
      { 'hub.mode': 'subscribe', 'hub.verify_token': 'nope', 'hub.challenge': '1' },
      { 'hub.mode': 'subscribe', 'hub.verify_token': `${conn.verifyToken}x`, 'hub.challenge': '1' },
      { 'hub.mode': 'unsubscribe', 'hub.verify_token': conn.verifyToken, 'hub.challenge': '1' },
      { 'hub.mode': 'subscribe', 'hub.challenge': '1' },
      { 'hub.mode': 'subscribe', 'hub.verify_token': conn.verifyToken },
    ]) {
      const res = await verify(conn, query);
      expect(res.statusCode, JSON.stringify(query)).toBe(403);
      expect(res.json().error.code).toBe('forbidden');
      expect(res.body).not.toContain(conn.verifyToken);
    }
  });

  it('is a 404 for an unknown connection', async () => {
    const res = await verify(
      { id: 'chn_unknown' },
      { 'hub.mode': 'subscribe', 'hub.verify_token': 'x', 'hub.challenge': '1' },
    );
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('not_found');
  });
});

describe('POST /channels/{id}/webhook: signature and durable storage', () => {
  it('stores the exact bytes with a channel.inbound job and answers 200', async () => {
    const { acc, conn } = await setup();
    // Whitespace and key order as Meta happened to send them: the bytes are kept, not re-encoded.
    const raw = Buffer.from(
      JSON.stringify(
        inboundWebhook(
          business(conn),
          { waId: '14155550100', name: 'A' },
          waMessage.text('14155550100', 'héllo'),
        ),
        null,
        2,
      ),
    );
    const res = await post(conn, raw);
    expect(res.status).toBe(200);
    const rows = await storedWebhooks(acc.accountId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.connection_id).toBe(conn.id);
    expect(rows[0]!.processed_at).toBeNull();
    expect(Buffer.compare(rows[0]!.body, raw)).toBe(0);
    expect(await jobsOf(acc.accountId)).toEqual([
      {
        kind: 'channel.inbound',
        payload: { v: 1, webhook_id: rows[0]!.id },
        attempts: 0,
        dead_at: null,
      },
    ]);
  });

  it('is worked on in-process right after its commit, its job leased meanwhile; past the in-process limit, webhooks wait for the runners', async () => {
    const own = await startInboundHarness({ inlineMax: 1 });
    try {
      const acc = await newAccount(own.t);
      const conn = await connectWhatsApp(own, acc.accountId);
      const real = own.sink.current;
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      own.sink.current = Object.assign(Object.create(real) as typeof real, {
        receiveMany: async (...args: Parameters<typeof real.receiveMany>) => {
          await held;
          return real.receiveMany(...args);
        },
      });
      const jobs = () =>
        own.t.db
          .selectFrom('jobs')
          .select(['payload', 'attempts', 'locked_until'])
          .where('account_id', '=', acc.accountId)
          .orderBy('id')
          .execute();
      const deliverOne = async (text: string) => {
        const phone = randomPhone();
        const res = await postSignedWebhook(
          conn.webhookUrl,
          inboundWebhook(
            business(conn),
            { waId: waIdOf(phone), name: 'Held' },
            waMessage.text(waIdOf(phone), text),
          ),
          conn.appSecret,
        );
        expect(res.status).toBe(200);
      };
      await deliverOne('first');
      await deliverOne('second');
      const [first, second] = await jobs();
      // The first is this process's (leased, its first attempt under way); the second, over the
      // limit of one, is due for any runner.
      expect(first).toMatchObject({ attempts: 1, locked_until: expect.any(Date) });
      expect(second).toMatchObject({ attempts: 0, locked_until: null });
      release();
      await own.drain(acc.accountId);
      const recorded = await own.t.db
        .selectFrom('messages')
        .select('content')
        .where('account_id', '=', acc.accountId)
        .execute();
      expect(recorded.map((m) => m.content).sort()).toEqual(['first', 'second']);
      expect(await jobs()).toEqual([]);
    } finally {
      await own.close();
    }
  });

  it('concurrent deliveries to two accounts, stored together, are each kept once with their own job; bad signatures among them change nothing', async () => {
    const a = await setup();
    const b = await setup();
    const bodies = new Map<string, Buffer>();
    const posts = [];
    for (let i = 0; i < 30; i++) {
      for (const { conn } of [a, b]) {
        const sender = `1415555${String(1000 + i)}`;
        const raw = Buffer.from(
          JSON.stringify(
            inboundWebhook(
              business(conn),
              { waId: sender, name: `S${i}` },
              waMessage.text(sender, `${conn.id} #${i}`),
            ),
          ),
        );
        bodies.set(`${conn.id} #${i}`, raw);
        posts.push(post(conn, raw).then((res) => expect(res.status).toBe(200)));
        if (i % 5 === 0)
          posts.push(
            postSignedWebhook(conn.webhookUrl, raw, 'not the app secret').then((res) =>
              expect(res.status).toBe(401),
            ),
          );
      }
    }
    await Promise.all(posts);
    for (const { acc, conn } of [a, b]) {
      const rows = await storedWebhooks(acc.accountId);
      expect(rows).toHaveLength(30);
      for (const row of rows) {
        expect(row.connection_id).toBe(conn.id);
        const text = JSON.parse(row.body.toString('utf8')).entry[0].changes[0].value.messages[0]
          .text.body as string;
        expect(Buffer.compare(row.body, bodies.get(text)!)).toBe(0);
      }
      const jobs = await jobsOf(acc.accountId);
      expect(jobs.map((j) => (j.payload as { webhook_id: string }).webhook_id).sort()).toEqual(
        rows.map((r) => r.id).sort(),
      );
    }
  });

  it('is a 401 with nothing recorded when the signature is missing, wrong, or over other bytes', async () => {
    const { acc, conn } = await setup();
    const payload = inboundWebhook(
      business(conn),
      { waId: '14155550100', name: 'A' },
      waMessage.text('14155550100', 'hi'),
    );
    const bytes = Buffer.from(JSON.stringify(payload));
    const reencoded = Buffer.from(JSON.stringify(payload, null, 1));
    const { hubSignature } = await import('../fake-graph/webhooks.js');
    for (const signature of [
      null,
      '',
      'sha256=',
      hubSignature('another app secret', bytes),
      hubSignature(conn.appSecret, reencoded),
      hubSignature(conn.appSecret, bytes).replace('sha256=', 'sha1='),
      hubSignature(conn.appSecret, bytes).slice(0, -2),
    ]) {
      const res = await postSignedWebhook(conn.webhookUrl, bytes, conn.appSecret, { signature });
      expect(res.status, String(signature)).toBe(401);
      expect(JSON.parse(res.body).error.code).toBe('unauthorized');
    }
    expect(await storedWebhooks(acc.accountId)).toEqual([]);
    expect(await jobsOf(acc.accountId)).toEqual([]);
  });

  it('is a 404 for an unknown connection, and a 400 for signed bytes that are not JSON', async () => {
    const { acc, conn } = await setup();
    const unknown = await postSignedWebhook(
      `${h.url}/channels/chn_nope/webhook`,
      {},
      conn.appSecret,
    );
    expect(unknown.status).toBe(404);
    const notJson = await post(conn, Buffer.from('{"object": '));
    expect(notJson.status).toBe(400);
    expect(JSON.parse(notJson.body).error.code).toBe('invalid_request');
    expect(await storedWebhooks(acc.accountId)).toEqual([]);
  });

  it('takes the bytes whatever Content-Type says (or none): the signature is what counts', async () => {
    const { acc, conn } = await setup();
    const { hubSignature } = await import('../fake-graph/webhooks.js');
    const raw = Buffer.from(JSON.stringify({ object: 'whatsapp_business_account', entry: [] }));
    for (const contentType of ['text/plain', 'application/json; charset=utf-8', undefined]) {
      const headers: Record<string, string> = {
        'x-hub-signature-256': hubSignature(conn.appSecret, raw),
      };
      if (contentType) headers['content-type'] = contentType;
      const res = await h.app.inject({
        method: 'POST',
        url: `/channels/${conn.id}/webhook`,
        headers,
        payload: raw,
      });
      expect(res.statusCode, String(contentType)).toBe(200);
    }
    expect(await storedWebhooks(acc.accountId)).toHaveLength(3);
  });

  it('refuses a body over 1 MiB with 413 in the envelope', async () => {
    const { acc, conn } = await setup();
    const big = Buffer.from(JSON.stringify({ object: 'x', pad: 'a'.repeat(1024 * 1024) }));
    const res = await post(conn, big);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).error.code).toBe('payload_too_large');
    expect(await storedWebhooks(acc.accountId)).toEqual([]);
  });

  it('keeps a webhook whose processing fails and processes it later from the stored copy', async () => {
    const { acc, conn } = await setup();
    const phone = randomPhone();
    const real = h.sink.current;
    h.sink.current = {
      receive: async () => {
        throw new Error('database hiccup');
      },
      receiveMany: async () => {
        throw new Error('database hiccup');
      },
      applyProviderStatus: real.applyProviderStatus.bind(real),
      applyProviderStatusMany: real.applyProviderStatusMany.bind(real),
      knowsIdentity: real.knowsIdentity.bind(real),
      nameIdentity: real.nameIdentity.bind(real),
      applyStatusUpTo: real.applyStatusUpTo.bind(real),
    };
    try {
      const res = await post(
        conn,
        inboundWebhook(
          business(conn),
          { waId: waIdOf(phone), name: 'Kept' },
          waMessage.text(waIdOf(phone), 'still here'),
        ),
      );
      expect(res.status).toBe(200);
      await h.drain(acc.accountId);
      expect(await inboundMessages(acc.accountId)).toEqual([]);
      const [job] = await jobsOf(acc.accountId);
      expect(job).toMatchObject({ kind: 'channel.inbound', attempts: 1, dead_at: null });
    } finally {
      h.sink.current = real;
    }
    h.t.clock.advance(1_000);
    await h.drain(acc.accountId);
    const messages = await inboundMessages(acc.accountId);
    expect(messages.map((m) => m.content)).toEqual(['still here']);
    const [stored] = await storedWebhooks(acc.accountId);
    expect(stored!.processed_at).not.toBeNull();
    expect(await jobsOf(acc.accountId)).toEqual([]);
  });
});

describe('WhatsApp messages[] → inbound messages', () => {
  it('maps every kind without a type of its own to readable text, never dropping one', async () => {
    const { acc, conn } = await setup();
    const from = waIdOf(randomPhone());
    const cases: [Record<string, unknown>, string][] = [
      [waMessage.text(from, 'Hi there'), 'Hi there'],
      [
        waMessage.location(from, {
          latitude: 37.4848,
          longitude: -122.1484,
          name: 'Meta HQ',
          address: '1 Hacker Way, Menlo Park',
        }),
        'Location: Meta HQ, 1 Hacker Way, Menlo Park (37.4848, -122.1484)',
      ],
      [waMessage.location(from, { latitude: 51.5, longitude: -0.12 }), 'Location: 51.5, -0.12'],
      [
        waMessage.contacts(from, {
          formattedName: 'Jane Doe',
          phone: '+1 (415) 555-0199',
          email: 'jane@example.com',
        }),
        'Contact: Jane Doe, +1 (415) 555-0199, jane@example.com',
      ],
      [waMessage.button(from, 'Yes, confirm', 'CONFIRM_PAYLOAD'), 'Yes, confirm'],
      [waMessage.buttonReply(from, { id: 'btn-1', title: 'Track my order' }), 'Track my order'],
      [
        waMessage.listReply(from, { id: 'row-2', title: 'Size M', description: 'Medium, 38-40' }),
        'Size M (Medium, 38-40)',
      ],
      [waMessage.reaction(from, '👍'), 'Reacted 👍 to a message'],
      [waMessage.reaction(from, ''), 'Removed a reaction'],
      [
        waMessage.unsupported(from),
        '[Unsupported WhatsApp message (unsupported): Message type unknown: Message type is currently not supported.]',
      ],
      [
        { from, id: wamid(), timestamp: '1700000000', type: 'order', order: { catalog_id: '1' } },
        '[Unsupported WhatsApp message (order)]',
      ],
    ];
    await deliver(
      acc,
      conn,
      whatsappWebhook(business(conn), {
        contacts: [waContact(from, 'Kim')],
        messages: cases.map(([m]) => m),
      }),
    );
    const messages = await inboundMessages(acc.accountId);
    expect(messages.map((m) => [m.provider_message_id, m.type, m.content, m.media_url])).toEqual(
      cases.map(([m, text]) => [m.id, 'text', text, null]),
    );
    // One contact and one conversation for them all.
    expect(new Set(messages.map((m) => m.conversation_id)).size).toBe(1);
  });

  it('an unknown sender becomes a contact with phone +{wa_id} and the profile name; a known one keeps theirs', async () => {
    const { acc, conn } = await setup();
    const known = randomPhone();
    const created = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: known, name: 'Alice Known' },
    });
    expect(created.statusCode).toBe(201);
    const stranger = randomPhone();
    await deliver(
      acc,
      conn,
      inboundWebhook(
        business(conn),
        { waId: waIdOf(stranger), name: 'Bob Stranger' },
        waMessage.text(waIdOf(stranger), 'hello'),
      ),
    );
    await deliver(
      acc,
      conn,
      inboundWebhook(
        business(conn),
        { waId: waIdOf(known), name: 'Profile Name' },
        waMessage.text(waIdOf(known), 'hi again'),
      ),
    );
    const contacts = await h.t.db
      .selectFrom('contacts')
      .select(['phone', 'name'])
      .where('account_id', '=', acc.accountId)
      .orderBy('phone')
      .execute();
    expect(contacts).toEqual(
      [
        { phone: known, name: 'Alice Known' },
        { phone: stranger, name: 'Bob Stranger' },
      ].sort((a, b) => a.phone.localeCompare(b.phone)),
    );
    const createdEvents = await eventsOf(h.t.db, acc.accountId, 'contact.created');
    expect(createdEvents.map((e) => (e.data as { phone: string; name: string }).name)).toEqual([
      'Alice Known',
      'Bob Stranger',
    ]);
  });

  it('records message.received exactly as the message reads, and opens the 24-hour window', async () => {
    const { acc, conn } = await setup();
    const phone = randomPhone();
    await deliver(
      acc,
      conn,
      inboundWebhook(
        business(conn),
        { waId: waIdOf(phone), name: 'Eve' },
        waMessage.text(waIdOf(phone), 'window please'),
      ),
    );
    const [message] = await inboundMessages(acc.accountId);
    const received = await eventsOf(h.t.db, acc.accountId, 'message.received');
    expect(received).toEqual([{ type: 'message.received', data: toMessage(message!) }]);
    expect(message).toMatchObject({ status: 'delivered', type: 'text', content: 'window please' });
    const conversation = await h.t.db
      .selectFrom('conversations')
      .select(['channel', 'status', 'last_inbound_at'])
      .where('account_id', '=', acc.accountId)
      .where('id', '=', message!.conversation_id)
      .executeTakeFirstOrThrow();
    expect(conversation).toMatchObject({ channel: 'whatsapp', status: 'open' });
    expect(conversation.last_inbound_at).not.toBeNull();
  });

  it('keeps text PostgreSQL cannot hold (NUL, lone surrogates) as readable text instead of failing', async () => {
    const { acc, conn } = await setup();
    const phone = randomPhone();
    await deliver(
      acc,
      conn,
      inboundWebhook(
        business(conn),
        { waId: waIdOf(phone), name: 'Nul\u0000Name' },
        waMessage.text(waIdOf(phone), 'a\u0000b\ud800c'),
      ),
    );
    const [message] = await inboundMessages(acc.accountId);
    expect(message!.content).toBe('ab\ufffdc');
    expect(await jobsOf(acc.accountId)).toEqual([]);
  });

  it('ignores entries of another phone number, and objects other than whatsapp_business_account', async () => {
    const { acc, conn } = await setup();
    const phone = randomPhone();
    await deliver(
      acc,
      conn,
      inboundWebhook(
        { phoneNumberId: '999000999', businessAccountId: conn.businessAccountId },
        { waId: waIdOf(phone), name: 'X' },
        waMessage.text(waIdOf(phone), 'not for this number'),
      ),
    );
    await deliver(acc, conn, { object: 'page', entry: [] });
    expect(await inboundMessages(acc.accountId)).toEqual([]);
    const rows = await storedWebhooks(acc.accountId);
    expect(rows.every((r) => r.processed_at !== null)).toBe(true);
  });

  it('takes effect once: the same webhook twice, and one message id in two webhooks', async () => {
    const { acc, conn } = await setup();
    const phone = randomPhone();
    const id = wamid();
    const payload = inboundWebhook(
      business(conn),
      { waId: waIdOf(phone), name: 'Dup' },
      waMessage.text(waIdOf(phone), 'once', id),
    );
    const other = inboundWebhook(
      business(conn),
      { waId: waIdOf(phone), name: 'Dup' },
      waMessage.text(waIdOf(phone), 'once, again', id),
      waMessage.text(waIdOf(phone), 'second message'),
    );
    // Meta retries a delivery it thinks failed, possibly at the same time.
    const answers = await Promise.all([
      post(conn, payload),
      post(conn, payload),
      post(conn, other),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    await h.drain(acc.accountId);
    await deliver(acc, conn, payload);
    const messages = await inboundMessages(acc.accountId);
    expect(messages.filter((m) => m.provider_message_id === id)).toHaveLength(1);
    expect(messages).toHaveLength(2);
    const received = await eventsOf(h.t.db, acc.accountId, 'message.received');
    expect(received).toHaveLength(2);
    expect(await eventsOf(h.t.db, acc.accountId, 'contact.created')).toHaveLength(1);
  });
});

describe('WhatsApp statuses[] → delivery status of outbound messages', () => {
  async function outbound(acc: TestAccount) {
    const phone = randomPhone();
    const providerId = wamid();
    const id = await insertOutbound(h.t.db, acc.accountId, {
      phone,
      providerMessageId: providerId,
    });
    return { id, phone, providerId, recipient: waIdOf(phone) };
  }

  it('moves forward only: read before delivered is read, delivered after it changes nothing', async () => {
    const { acc, conn } = await setup();
    const m = await outbound(acc);
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.read(m.providerId, m.recipient)),
    );
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.delivered(m.providerId, m.recipient)),
    );
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.read(m.providerId, m.recipient)),
    );
    expect((await messageByProviderId(acc.accountId, m.providerId))!.status).toBe('read');
    const events = await eventsOf(h.t.db, acc.accountId);
    expect(events.map((e) => e.type)).toEqual(['message.read']);
  });

  it('delivered then read, each once, in one webhook or two', async () => {
    const { acc, conn } = await setup();
    const m = await outbound(acc);
    await deliver(
      acc,
      conn,
      statusWebhook(
        business(conn),
        waStatus.sent(m.providerId, m.recipient),
        waStatus.delivered(m.providerId, m.recipient),
      ),
    );
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.delivered(m.providerId, m.recipient)),
    );
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.read(m.providerId, m.recipient)),
    );
    expect((await messageByProviderId(acc.accountId, m.providerId))!.status).toBe('read');
    expect((await eventsOf(h.t.db, acc.accountId)).map((e) => e.type)).toEqual([
      'message.delivered',
      'message.read',
    ]);
  });

  it('failed carries Meta code and title as failure_reason; nothing moves it afterwards', async () => {
    const { acc, conn } = await setup();
    const m = await outbound(acc);
    await deliver(
      acc,
      conn,
      statusWebhook(
        business(conn),
        waStatus.failed(m.providerId, m.recipient, {
          code: 131049,
          title: 'This message was not delivered to maintain healthy ecosystem engagement.',
        }),
      ),
    );
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.read(m.providerId, m.recipient)),
    );
    const row = await messageByProviderId(acc.accountId, m.providerId);
    expect(row).toMatchObject({
      status: 'failed',
      failure_reason:
        '(#131049) This message was not delivered to maintain healthy ecosystem engagement.',
    });
  });

  it('sent only confirms: no change and no event', async () => {
    const { acc, conn } = await setup();
    const m = await outbound(acc);
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.sent(m.providerId, m.recipient)),
    );
    expect((await messageByProviderId(acc.accountId, m.providerId))!.status).toBe('sent');
    expect(await eventsOf(h.t.db, acc.accountId)).toEqual([]);
    const [stored] = await storedWebhooks(acc.accountId);
    expect(stored!.processed_at).not.toBeNull();
    expect(await jobsOf(acc.accountId)).toEqual([]);
  });

  it('a status for a provider id not known yet is retried until the message appears', async () => {
    const { acc, conn } = await setup();
    const providerId = wamid();
    const phone = randomPhone();
    await deliver(
      acc,
      conn,
      statusWebhook(business(conn), waStatus.delivered(providerId, waIdOf(phone))),
    );
    const [job] = await jobsOf(acc.accountId);
    expect(job).toMatchObject({ kind: 'channel.inbound', attempts: 1, dead_at: null });
    // The send pipeline records the id a moment later.
    await insertOutbound(h.t.db, acc.accountId, { phone, providerMessageId: providerId });
    h.t.clock.advance(INBOUND_WAIT_DELAYS_MS[0]!);
    await h.drain(acc.accountId);
    expect((await messageByProviderId(acc.accountId, providerId))!.status).toBe('delivered');
    expect(await jobsOf(acc.accountId)).toEqual([]);
  });

  it("a status for a provider id never known (a message sent from the Business app) waits as briefly as Messenger's, then the webhook is finished", async () => {
    const { acc, conn } = await setup();
    // One webhook with a report we can place and one we never sent: the first takes effect at
    // once, the other is waited for (a send may still be recording its id), then dropped.
    const m = await outbound(acc);
    await deliver(
      acc,
      conn,
      statusWebhook(
        business(conn),
        waStatus.delivered(m.providerId, m.recipient),
        waStatus.read(wamid(), '14155550123'),
      ),
    );
    expect((await messageByProviderId(acc.accountId, m.providerId))!.status).toBe('delivered');
    const pending = async () => (await storedWebhooks(acc.accountId))[0]!.processed_at;
    let waited = 0;
    while ((await pending()) === null && waited < 60_000) {
      h.t.clock.advance(1_000);
      waited += 1_000;
      await h.drain(acc.accountId);
    }
    expect(await pending()).not.toBeNull();
    const shortWaits = INBOUND_WAIT_DELAYS_MS.slice(0, UNKNOWN_REPORT_WAITS);
    expect(waited).toBe(shortWaits.reduce((sum, delay) => sum + delay, 0));
    expect(await jobsOf(acc.accountId)).toEqual([]);
  });
});

describe('message_template_status_update', () => {
  it("reports Meta's review of the connection's templates, and only of its own business account", async () => {
    const { acc, conn } = await setup();
    await deliver(
      acc,
      conn,
      templateStatusWebhook(conn.businessAccountId, {
        templateId: 1234567890123,
        name: 'order_update',
        language: 'en_US',
        event: 'REJECTED',
        reason: 'INCORRECT_CATEGORY',
      }),
    );
    await deliver(
      acc,
      conn,
      templateStatusWebhook(conn.businessAccountId, {
        templateId: '987',
        name: 'welcome',
        event: 'APPROVED',
      }),
    );
    await deliver(
      acc,
      conn,
      templateStatusWebhook('111222333', { templateId: '5', name: 'not_ours', event: 'APPROVED' }),
    );
    expect(h.templateReports.filter((r) => r.accountId === acc.accountId)).toEqual([
      {
        accountId: acc.accountId,
        report: {
          providerTemplateId: '1234567890123',
          name: 'order_update',
          language: 'en_US',
          status: 'rejected',
          reason: 'INCORRECT_CATEGORY',
        },
      },
      {
        accountId: acc.accountId,
        report: {
          providerTemplateId: '987',
          name: 'welcome',
          language: 'en_US',
          status: 'approved',
          reason: null,
        },
      },
    ]);
  });
});
