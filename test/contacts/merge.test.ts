import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage } from '../../src/channels/channel.js';
import type { Channel } from '../../src/db/schema.js';
import {
  createPrivateDatabase,
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { createContact, eventsOf, expectError, expectStatus, receive } from '../inbox-helpers.js';

let dropDb: () => Promise<void>;
let t: TestApp;
/** Messenger on a provider standing in for a real one, which records what it sends. */
let real: TestApp;
const sentOnMessenger: OutboundMessage[] = [];
const messenger: ChannelProvider = {
  name: 'messenger',
  templatesBypassWindow: false,
  reachesAnyContact: false,
  send: (m) => {
    sentOnMessenger.push(m);
    return Promise.resolve({ status: 'accepted', providerMessageId: `mid.${m.messageId}` });
  },
};

beforeAll(async () => {
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  t = await startTestApp({ databaseUrl: db.url });
  real = await startTestApp({ databaseUrl: db.url, providers: { messenger } });
});
afterAll(async () => {
  await real?.close();
  await t?.close();
  await dropDb?.();
});

function psid(): string {
  return String(6_000_000_000_000_000n + BigInt(randomBytes(4).readUInt32BE()));
}

/** An inbound text from the sender known on `channel` by `identity`, as an adapter records it. */
function receiveFrom(
  app: TestApp,
  acc: TestAccount,
  channel: Channel,
  identity: string,
  content = 'hello',
) {
  return app.services.messages.receive(
    { accountId: acc.accountId },
    { channel, from: { identity }, type: 'text', content, mediaUrl: null },
  );
}

/** A phone-less contact met on `channel`, with its conversation there. */
async function metOn(
  app: TestApp,
  acc: TestAccount,
  channel: Channel,
  identity = psid(),
): Promise<{ id: string; identity: string; conversationId: string }> {
  const m = await receiveFrom(app, acc, channel, identity);
  const conv = await app.db
    .selectFrom('conversations')
    .select('contact_id')
    .where('account_id', '=', acc.accountId)
    .where('id', '=', m.conversation_id)
    .executeTakeFirstOrThrow();
  return { id: conv.contact_id, identity, conversationId: m.conversation_id };
}

function merge(acc: TestAccount, into: string, other: string, headers?: Record<string, string>) {
  return acc.call({
    method: 'POST',
    url: `/v1/contacts/${into}/merge`,
    payload: { contact_id: other },
    headers,
  });
}

async function getContact(acc: TestAccount, id: string) {
  return acc.call({ method: 'GET', url: `/v1/contacts/${id}` });
}

async function conversationsOf(app: TestApp, acc: TestAccount) {
  return app.db
    .selectFrom('conversations')
    .select(['id', 'contact_id', 'channel'])
    .where('account_id', '=', acc.accountId)
    .orderBy('channel')
    .execute();
}

async function contactIdsOf(app: TestApp, acc: TestAccount) {
  const rows = await app.db
    .selectFrom('contacts')
    .select('id')
    .where('account_id', '=', acc.accountId)
    .execute();
  return rows.map((r) => r.id).sort();
}

describe('POST /v1/contacts/{id}/merge', () => {
  it("folds the other contact in: identities, conversations with their messages, tags, fields; 200 with the merged contact, the other's id 404", async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const created = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: {
        phone,
        tags: ['vip', 'shared'],
        custom_fields: { plan: 'gold', seats: 3 },
      },
    });
    expectStatus(created, 201);
    const into = created.json();
    const onWhatsapp = await receive(acc, into.id, 'whatsapp');
    const other = await metOn(t, acc, 'messenger');
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${other.id}`,
        payload: {
          name: 'Ada from Messenger',
          email: 'ada@example.com',
          tags: ['shared', 'fb'],
          custom_fields: { plan: 'silver', source: 'facebook' },
        },
      }),
      200,
    );
    const second = await receiveFrom(t, acc, 'messenger', other.identity, 'second');
    const eventsBefore = (await eventsOf(t.db, acc.accountId)).length;
    // Read once, so that a stale cached copy would show if the merge did not invalidate it.
    expectStatus(await getContact(acc, into.id), 200);

    const res = await merge(acc, into.id, other.id);
    expectStatus(res, 200);
    const merged = res.json();
    expect(merged).toEqual({
      id: into.id,
      phone,
      name: 'Ada from Messenger',
      email: 'ada@example.com',
      tags: ['vip', 'shared', 'fb'],
      lifecycle_stage: null,
      custom_fields: { plan: 'gold', seats: 3, source: 'facebook' },
      identities: [
        { channel: 'whatsapp', id: phone },
        { channel: 'messenger', id: other.identity },
      ],
      created_at: into.created_at,
      updated_at: expect.any(String),
    });
    expect((await getContact(acc, into.id)).json()).toEqual(merged);
    expectError(await getContact(acc, other.id), 404);
    expect(await contactIdsOf(t, acc)).toEqual([into.id]);

    // The conversations moved whole, with their messages.
    expect(await conversationsOf(t, acc)).toEqual([
      { id: other.conversationId, contact_id: into.id, channel: 'messenger' },
      { id: onWhatsapp.conversation_id, contact_id: into.id, channel: 'whatsapp' },
    ]);
    const conversation = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${other.conversationId}`,
    });
    expectStatus(conversation, 200);
    expect(conversation.json().contact_id).toBe(into.id);
    expect(conversation.json().messages.map((m: { id: string }) => m.id)).toContain(second.id);
    // One event: contact.updated, the merged contact as answered (an API key's: actor null).
    const after = await eventsOf(t.db, acc.accountId);
    expect(after.slice(eventsBefore)).toEqual([
      { type: 'contact.updated', data: { ...merged, actor: null } },
    ]);
  });

  it('a missing phone, name or email is taken from the other contact; present ones are kept', async () => {
    const acc = await newAccount(t);
    const phoneless = await metOn(t, acc, 'instagram');
    const phone = randomPhone();
    const withPhone = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone, name: 'Grace', email: 'grace@example.com' },
    });
    expectStatus(withPhone, 201);
    const res = await merge(acc, phoneless.id, withPhone.json().id);
    expectStatus(res, 200);
    expect(res.json()).toMatchObject({
      id: phoneless.id,
      phone,
      name: 'Grace',
      email: 'grace@example.com',
      identities: [
        { channel: 'whatsapp', id: phone },
        { channel: 'instagram', id: phoneless.identity },
      ],
    });
    // The phone now finds the merged contact: a message to it lands there, no new contact.
    const byPhone = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: { channel: 'whatsapp', phone, type: 'text', content: 'hi' },
    });
    expectStatus(byPhone, 201);
    expect(await contactIdsOf(t, acc)).toEqual([phoneless.id]);

    // A name and email already present are kept.
    const named = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), name: 'Keep me', email: 'keep@example.com' },
    });
    const donor = await metOn(t, acc, 'messenger');
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${donor.id}`,
        payload: { name: 'Not me', email: 'not@example.com' },
      }),
      200,
    );
    const kept = await merge(acc, named.json().id, donor.id);
    expectStatus(kept, 200);
    expect(kept.json()).toMatchObject({ name: 'Keep me', email: 'keep@example.com' });
  });

  it('an inbound message for the merged-away identity lands on the merged contact and its moved conversation', async () => {
    const acc = await newAccount(t);
    const into = await createContact(acc);
    const other = await metOn(t, acc, 'messenger');
    expectStatus(await merge(acc, into.id, other.id), 200);
    const after = await receiveFrom(t, acc, 'messenger', other.identity, 'after the merge');
    expect(after.conversation_id).toBe(other.conversationId);
    expect(await contactIdsOf(t, acc)).toEqual([into.id]);
    expect(await eventsOf(t.db, acc.accountId, 'contact.created')).toHaveLength(2);
  });

  it('a real provider reaches the merged contact through the identity it took over', async () => {
    const acc = await newAccount(real);
    const into = await createContact(acc);
    const other = await metOn(real, acc, 'messenger');
    const before = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: into.id, channel: 'messenger', type: 'text', content: 'hi' },
    });
    expectError(before, 422, 'contact_id');
    expectStatus(await merge(acc, into.id, other.id), 200);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: into.id, channel: 'messenger', type: 'text', content: 'hi' },
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ status: 'sent', conversation_id: other.conversationId });
    expect(sentOnMessenger.filter((m) => m.accountId === acc.accountId).map((m) => m.to)).toEqual([
      { contactId: into.id, phone: into.phone, identity: other.identity },
    ]);
  });

  it('409 when both have an identity on one channel (two phones, two PSIDs), and nothing changes', async () => {
    const acc = await newAccount(t);
    const a = await createContact(acc);
    const b = await createContact(acc);
    const twoPhones = expectError(await merge(acc, a.id, b.id), 409);
    expect(twoPhones.message).toMatch(/both have a phone/);

    const x = await metOn(t, acc, 'messenger');
    const y = await metOn(t, acc, 'messenger');
    const twoPsids = expectError(await merge(acc, x.id, y.id), 409);
    expect(twoPsids.message).toMatch(/both have a messenger identity/);

    expect(await contactIdsOf(t, acc)).toEqual([a.id, b.id, x.id, y.id].sort());
    expect((await getContact(acc, y.id)).json().identities).toEqual([
      { channel: 'messenger', id: y.identity },
    ]);
    expect(await conversationsOf(t, acc)).toEqual(
      expect.arrayContaining([
        { id: x.conversationId, contact_id: x.id, channel: 'messenger' },
        { id: y.conversationId, contact_id: y.id, channel: 'messenger' },
      ]),
    );
  });

  it('two merges into one contact at once, each bringing an identity on the same channel: one 200, the other the 409 it is alone', async () => {
    const acc = await newAccount(t);
    const into = await createContact(acc);
    const b = await metOn(t, acc, 'messenger');
    const c = await metOn(t, acc, 'messenger');
    const mergesWaiting = async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock'
          AND query LIKE 'select %from "contacts"%for update'`.execute(t.db);
      return rows[0]!.n;
    };
    // Both merges wait on the contact merged into, held here, and then run one after the other:
    // the second's locking statement began before the first moved its identity in.
    let answers: Awaited<ReturnType<typeof merge>>[] = [];
    await t.db.transaction().execute(async (trx) => {
      await trx.selectFrom('contacts').select('id').where('id', '=', into.id).forUpdate().execute();
      const both = Promise.all([merge(acc, into.id, b.id), merge(acc, into.id, c.id)]);
      for (let i = 0; i < 200 && (await mergesWaiting()) < 2; i++)
        await new Promise((r) => setTimeout(r, 25));
      expect(await mergesWaiting()).toBe(2);
      void both.then((a) => (answers = a));
    });
    for (let i = 0; i < 200 && answers.length === 0; i++)
      await new Promise((r) => setTimeout(r, 25));
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409]);
    const refused = expectError(
      answers.find((a) => a.statusCode === 409)!,
      409,
    );
    expect(refused.message).toMatch(/both have a messenger identity/);
    const merged = answers
      .find((a) => a.statusCode === 200)!
      .json<{
        identities: { channel: string }[];
      }>();
    expect(merged.identities.filter((i) => i.channel === 'messenger')).toHaveLength(1);
    expect(await contactIdsOf(t, acc)).toHaveLength(2);
  });

  it('both with a conversation on one channel without two identities there (the sandbox): the other’s is folded into this one’s', async () => {
    const acc = await newAccount(t);
    const withPhone = await createContact(acc);
    const phoneless = await metOn(t, acc, 'instagram');
    // Through the sandbox, a contact talks on any channel, identity or not.
    const a = await receive(acc, withPhone.id, 'webchat', 'from the phone contact');
    t.clock.advance(1000);
    const b = await receive(acc, phoneless.id, 'webchat', 'from the instagram contact');
    const note = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${b.conversation_id}/notes`,
      payload: { content: 'asked about sizes' },
    });
    expectStatus(note, 201);
    // This contact's conversation is resolved, the other's open: the merged one stays open.
    expectStatus(
      await acc.call({ method: 'POST', url: `/v1/conversations/${a.conversation_id}/resolve` }),
      200,
    );

    const res = await merge(acc, withPhone.id, phoneless.id);
    expectStatus(res, 200);
    expect(res.json().identities).toEqual([
      { channel: 'whatsapp', id: withPhone.phone },
      { channel: 'instagram', id: phoneless.identity },
    ]);
    expect(await contactIdsOf(t, acc)).toEqual([withPhone.id]);
    const conversations = await t.db
      .selectFrom('conversations')
      .select(['id', 'channel', 'status', 'contact_id'])
      .where('account_id', '=', acc.accountId)
      .orderBy('channel')
      .execute();
    expect(conversations).toEqual([
      {
        id: phoneless.conversationId,
        channel: 'instagram',
        status: 'open',
        contact_id: withPhone.id,
      },
      { id: a.conversation_id, channel: 'webchat', status: 'open', contact_id: withPhone.id },
    ]);
    const messages = await t.db
      .selectFrom('messages')
      .select(['conversation_id', 'content'])
      .where('account_id', '=', acc.accountId)
      .where('id', 'in', [a.id, b.id])
      .orderBy('created_at')
      .execute();
    expect(messages).toEqual([
      { conversation_id: a.conversation_id, content: 'from the phone contact' },
      { conversation_id: a.conversation_id, content: 'from the instagram contact' },
    ]);
    const notes = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${a.conversation_id}/notes`,
    });
    expect(notes.json().data.map((n: { content: string }) => n.content)).toEqual([
      'asked about sizes',
    ]);
    expectStatus(
      await acc.call({ method: 'GET', url: `/v1/conversations/${b.conversation_id}` }),
      404,
    );
  });

  it('404 for an unknown contact on either side, or one of another account; 422 for itself or a bad body', async () => {
    const acc = await newAccount(t);
    const stranger = await newAccount(t);
    const mine = await createContact(acc);
    const theirs = await metOn(t, stranger, 'messenger');
    expectError(await merge(acc, mine.id, 'con_nope'), 404);
    expectError(await merge(acc, 'con_nope', mine.id), 404);
    expectError(await merge(acc, mine.id, theirs.id), 404);
    expectError(await merge(stranger, theirs.id, mine.id), 404);
    expectError(await merge(acc, mine.id, mine.id), 422, 'contact_id');
    expectError(
      await acc.call({
        method: 'POST',
        url: `/v1/contacts/${mine.id}/merge`,
        payload: { contact_id: theirs.id, extra: 1 },
      }),
      422,
    );
    expectError(
      await acc.call({ method: 'POST', url: `/v1/contacts/${mine.id}/merge`, payload: {} }),
      422,
      'contact_id',
    );
    // The other account's contact is untouched.
    const still = await getContact(stranger, theirs.id);
    expectStatus(still, 200);
    expect(still.json().identities).toEqual([{ channel: 'messenger', id: theirs.identity }]);
  });

  it('422 when the two contacts have more than 50 tags together', async () => {
    const acc = await newAccount(t);
    const tags = (p: string) => Array.from({ length: 30 }, (_, i) => `${p}${i}`);
    const a = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), tags: tags('a') },
    });
    const b = await metOn(t, acc, 'messenger');
    expectStatus(
      await acc.call({ method: 'PUT', url: `/v1/contacts/${b.id}`, payload: { tags: tags('b') } }),
      200,
    );
    expectError(await merge(acc, a.json().id, b.id), 422, 'contact_id');
    expect(await contactIdsOf(t, acc)).toHaveLength(2);
  });

  it('honours Idempotency-Key: the same request replays the first answer and merges once', async () => {
    const acc = await newAccount(t);
    const into = await createContact(acc);
    const other = await metOn(t, acc, 'webchat');
    const headers = { 'idempotency-key': `merge-${randomBytes(4).toString('hex')}` };
    const first = await merge(acc, into.id, other.id, headers);
    expectStatus(first, 200);
    const again = await merge(acc, into.id, other.id, headers);
    expectStatus(again, 200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    // Without the key, the second merge finds the other contact gone.
    expectError(await merge(acc, into.id, other.id), 404);
  });

  it('is race-safe against inbound messages for the merged-away identity: every message lands on the merged contact', async () => {
    for (let round = 0; round < 5; round++) {
      const acc = await newAccount(t);
      const into = await createContact(acc);
      await receive(acc, into.id, 'whatsapp');
      const other = await metOn(t, acc, 'messenger');
      const inbound = Array.from({ length: 12 }, (_, i) =>
        receiveFrom(t, acc, 'messenger', other.identity, `during ${i}`),
      );
      const [merged, ...messages] = await Promise.all([
        merge(acc, into.id, other.id),
        ...inbound,
        ...Array.from({ length: 4 }, (_, i) =>
          receiveFrom(t, acc, 'messenger', other.identity, `late ${i}`),
        ),
      ]);
      expectStatus(merged, 200);
      expect(await contactIdsOf(t, acc)).toEqual([into.id]);
      const conversations = await conversationsOf(t, acc);
      expect(conversations).toEqual([
        { id: other.conversationId, contact_id: into.id, channel: 'messenger' },
        { id: expect.any(String), contact_id: into.id, channel: 'whatsapp' },
      ]);
      for (const m of messages) expect(m.conversation_id).toBe(other.conversationId);
      expect(await eventsOf(t.db, acc.accountId, 'contact.created')).toHaveLength(2);
    }
  });

  it('is race-safe against sends to the merged-away contact: each lands on the merged contact or answers 404', async () => {
    const acc = await newAccount(t);
    const into = await createContact(acc);
    const other = await metOn(t, acc, 'instagram');
    const sends = Array.from({ length: 12 }, (_, i) =>
      acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: other.id, channel: 'webchat', type: 'text', content: `s${i}` },
      }),
    );
    const [merged, ...answers] = await Promise.all([merge(acc, into.id, other.id), ...sends]);
    expectStatus(merged, 200);
    for (const a of answers) expect([201, 404], a.body).toContain(a.statusCode);
    // No conversation is left on the deleted contact.
    const conversations = await conversationsOf(t, acc);
    for (const c of conversations) expect(c.contact_id).toBe(into.id);
    expect(conversations.filter((c) => c.channel === 'webchat').length).toBeLessThanOrEqual(1);
  });
});
