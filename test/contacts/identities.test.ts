import { randomBytes } from 'node:crypto';
import { Migrator, sql, type Migration } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage, SendOutcome } from '../../src/channels/channel.js';
import { createDb, migrate } from '../../src/db/database.js';
import type { Channel } from '../../src/db/schema.js';
import * as m001 from '../../src/db/migrations/001_foundation.js';
import * as m002 from '../../src/db/migrations/002_inbox.js';
import * as m003 from '../../src/db/migrations/003_webhooks.js';
import * as m004 from '../../src/db/migrations/004_broadcasts.js';
import * as m005 from '../../src/db/migrations/005_hot_queues.js';
import * as m006 from '../../src/db/migrations/006_cache_notifications.js';
import * as m007 from '../../src/db/migrations/007_dead_jobs_and_retention.js';
import * as m008 from '../../src/db/migrations/008_channel_connections.js';
import * as m009 from '../../src/db/migrations/009_connection_insert_notify.js';
import { MessagesRepository } from '../../src/messages/messages.repository.js';
import {
  createPrivateDatabase,
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import {
  createContact,
  createTemplate,
  eventsOf,
  expectError,
  expectStatus,
  receive,
} from '../inbox-helpers.js';
import { testDatabaseUrl } from '../database.js';
import { sealForTests } from '../secrets-key.js';

/**
 * A provider standing in for a real one (its name is not `sandbox`): records what it is asked
 * to send and answers `answer`.
 */
class RecordingProvider implements ChannelProvider {
  readonly sent: OutboundMessage[] = [];
  answer: SendOutcome = { status: 'accepted', providerMessageId: '' };
  constructor(readonly name: 'messenger' | 'whatsapp_cloud') {
    this.templatesBypassWindow = name === 'whatsapp_cloud';
  }
  readonly templatesBypassWindow: boolean;
  readonly reachesAnyContact = false;
  send(message: OutboundMessage): Promise<SendOutcome> {
    this.sent.push(message);
    return Promise.resolve(
      this.answer.status === 'accepted'
        ? { status: 'accepted', providerMessageId: `p_${message.messageId}` }
        : this.answer,
    );
  }
  to(accountId: string): OutboundMessage['to'][] {
    return this.sent.filter((m) => m.accountId === accountId).map((m) => m.to);
  }
}

let dropDb: () => Promise<void>;
/** On the sandbox for every channel. */
let t: TestApp;
/** Messenger and WhatsApp on providers that stand in for real ones; the rest on the sandbox. */
let real: TestApp;
const messenger = new RecordingProvider('messenger');
const whatsapp = new RecordingProvider('whatsapp_cloud');

beforeAll(async () => {
  // Its own database: send jobs left queued here are never claimed by another file's runners.
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  t = await startTestApp({ databaseUrl: db.url });
  real = await startTestApp({
    databaseUrl: db.url,
    providers: { messenger, whatsapp },
  });
});
afterAll(async () => {
  await real?.close();
  await t?.close();
  await dropDb?.();
});

/** An inbound message from the sender known on `channel` by `identity`, as a provider adapter records it. */
function receiveFrom(
  app: TestApp,
  acc: TestAccount,
  channel: Channel,
  identity: string,
  opts: { name?: string | null; content?: string; providerMessageId?: string } = {},
) {
  return app.services.messages.receive(
    { accountId: acc.accountId },
    {
      channel,
      from: { identity, name: opts.name ?? null },
      type: 'text',
      content: opts.content ?? 'hello',
      mediaUrl: null,
      providerMessageId: opts.providerMessageId ?? null,
    },
  );
}

async function contactOfConversation(app: TestApp, acc: TestAccount, conversationId: string) {
  const row = await app.db
    .selectFrom('conversations')
    .select('contact_id')
    .where('account_id', '=', acc.accountId)
    .where('id', '=', conversationId)
    .executeTakeFirstOrThrow();
  return row.contact_id;
}

async function contactsOf(app: TestApp, acc: TestAccount) {
  return app.db
    .selectFrom('contacts')
    .select(['id', 'phone', 'name'])
    .where('account_id', '=', acc.accountId)
    .execute();
}

async function getContact(acc: TestAccount, id: string) {
  const res = await acc.call({ method: 'GET', url: `/v1/contacts/${id}` });
  expectStatus(res, 200);
  return res.json();
}

function psid(): string {
  return String(6_000_000_000_000_000n + BigInt(randomBytes(4).readUInt32BE()));
}

describe('contacts met by an identity', () => {
  it('a first message from an unknown PSID creates a phone-less contact with that identity and one contact.created', async () => {
    const acc = await newAccount(t);
    const id = psid();
    const message = await receiveFrom(t, acc, 'messenger', id, { name: 'Ada Lovelace' });
    const contactId = await contactOfConversation(t, acc, message.conversation_id);

    const contact = await getContact(acc, contactId);
    expect(contact).toEqual({
      id: contactId,
      phone: null,
      name: 'Ada Lovelace',
      email: null,
      tags: [],
      lifecycle_stage: null,
      custom_fields: {},
      identities: [{ channel: 'messenger', id }],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const created = await eventsOf(t.db, acc.accountId, 'contact.created');
    expect(created).toHaveLength(1);
    expect(created[0]!.data).toEqual(contact);

    // The second message finds the contact and its conversation: no second contact or event.
    const again = await receiveFrom(t, acc, 'messenger', id, { name: 'Someone Else' });
    expect(again.conversation_id).toBe(message.conversation_id);
    expect(await contactsOf(t, acc)).toEqual([
      { id: contactId, phone: null, name: 'Ada Lovelace' },
    ]);
    expect(await eventsOf(t.db, acc.accountId, 'contact.created')).toHaveLength(1);
  });

  it('10 concurrent first messages from one PSID make one contact, one contact.created and one conversation', async () => {
    const acc = await newAccount(t);
    const id = psid();
    const messages = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        receiveFrom(t, acc, 'messenger', id, { content: `burst ${i}`, providerMessageId: `m${i}` }),
      ),
    );
    expect(await contactsOf(t, acc)).toHaveLength(1);
    expect(new Set(messages.map((m) => m.conversation_id)).size).toBe(1);
    expect(await eventsOf(t.db, acc.accountId, 'contact.created')).toHaveLength(1);
    expect(await eventsOf(t.db, acc.accountId, 'message.received')).toHaveLength(10);
  });

  it('one id on two channels is two people; one id in two accounts is two contacts', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const id = psid();
    const onMessenger = await receiveFrom(t, acc, 'messenger', id);
    const onInstagram = await receiveFrom(t, acc, 'instagram', id);
    const elsewhere = await receiveFrom(t, other, 'messenger', id);
    const a = await contactOfConversation(t, acc, onMessenger.conversation_id);
    const b = await contactOfConversation(t, acc, onInstagram.conversation_id);
    expect(a).not.toBe(b);
    expect((await getContact(acc, b)).identities).toEqual([{ channel: 'instagram', id }]);
    const c = await contactOfConversation(t, other, elsewhere.conversation_id);
    expect((await getContact(other, c)).identities).toEqual([{ channel: 'messenger', id }]);
    // Neither account sees the other's contact.
    expectError(await acc.call({ method: 'GET', url: `/v1/contacts/${c}` }), 404);
  });

  it('receive still takes a phone with a name, and a WhatsApp identity is the phone', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const byPhone = await t.services.messages.receive(
      { accountId: acc.accountId },
      {
        channel: 'whatsapp',
        from: { phone, name: 'Grace' },
        type: 'text',
        content: 'hi',
        mediaUrl: null,
      },
    );
    const byIdentity = await receiveFrom(t, acc, 'whatsapp', phone.slice(1));
    expect(byIdentity.conversation_id).toBe(byPhone.conversation_id);
    const contact = await getContact(
      acc,
      await contactOfConversation(t, acc, byPhone.conversation_id),
    );
    expect(contact).toMatchObject({
      phone,
      name: 'Grace',
      identities: [{ channel: 'whatsapp', id: phone }],
    });
  });

  it('a name learnt after the contact was created (a profile lookup) names it only if it has none', async () => {
    const acc = await newAccount(t);
    const m = await receiveFrom(t, acc, 'messenger', psid());
    const contactId = await contactOfConversation(t, acc, m.conversation_id);
    expect((await getContact(acc, contactId)).name).toBeNull();
    const scope = { accountId: acc.accountId };
    expect(await t.services.contacts.nameIfUnnamed(scope, contactId, '  Ada Lovelace ')).toBe(true);
    expect((await getContact(acc, contactId)).name).toBe('Ada Lovelace');
    expect(await t.services.contacts.nameIfUnnamed(scope, contactId, 'Someone Else')).toBe(false);
    expect((await getContact(acc, contactId)).name).toBe('Ada Lovelace');
    expect(await t.services.contacts.nameIfUnnamed(scope, 'con_nope', 'X')).toBe(false);
    // The naming, and only it, wrote contact.updated: the contact as GET shows it, no actor.
    expect(await eventsOf(t.db, acc.accountId, 'contact.updated')).toEqual([
      { type: 'contact.updated', data: await getContact(acc, contactId) },
    ]);
  });

  it('findByIdentity tells a known sender from a new one, within the account and channel', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const id = psid();
    const scope = { accountId: acc.accountId };
    expect(await t.services.contacts.findByIdentity(scope, 'messenger', id)).toBeUndefined();
    const m = await receiveFrom(t, acc, 'messenger', id);
    const contactId = await contactOfConversation(t, acc, m.conversation_id);
    expect(await t.services.contacts.findByIdentity(scope, 'messenger', id)).toEqual(
      await getContact(acc, contactId),
    );
    expect(await t.services.contacts.findByIdentity(scope, 'instagram', id)).toBeUndefined();
    expect(
      await t.services.contacts.findByIdentity({ accountId: other.accountId }, 'messenger', id),
    ).toBeUndefined();
  });

  it('an identity that is no id (empty, too long) is a 422, never a 500', async () => {
    const acc = await newAccount(t);
    await expect(receiveFrom(t, acc, 'messenger', '')).rejects.toMatchObject({ status: 422 });
    await expect(receiveFrom(t, acc, 'messenger', 'x'.repeat(257))).rejects.toMatchObject({
      status: 422,
    });
    expect(await contactsOf(t, acc)).toEqual([]);
  });

  it('identities list the phone first, then the other channels in channel order', async () => {
    const acc = await newAccount(t);
    const id = psid();
    const m = await receiveFrom(t, acc, 'webchat', `visitor-${id}`);
    const contactId = await contactOfConversation(t, acc, m.conversation_id);
    await t.db
      .insertInto('contact_identities')
      .values([
        {
          account_id: acc.accountId,
          contact_id: contactId,
          channel: 'messenger',
          external_id: id,
          created_at: new Date(),
        },
        {
          account_id: acc.accountId,
          contact_id: contactId,
          channel: 'instagram',
          external_id: `ig${id}`,
          created_at: new Date(),
        },
      ])
      .execute();
    const phone = randomPhone();
    expectStatus(
      await acc.call({ method: 'PUT', url: `/v1/contacts/${contactId}`, payload: { phone } }),
      200,
    );
    expect((await getContact(acc, contactId)).identities).toEqual([
      { channel: 'whatsapp', id: phone },
      { channel: 'instagram', id: `ig${id}` },
      { channel: 'messenger', id },
      { channel: 'webchat', id: `visitor-${id}` },
    ]);
  });
});

describe('phone-less contacts through the API', () => {
  it('POST /v1/contacts still requires a phone', async () => {
    const acc = await newAccount(t);
    expectError(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { name: 'No phone' } }),
      422,
    );
    expectError(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: null } }),
      422,
    );
  });

  it('a phone set later is checked as always (409 when another contact has it) and adds the whatsapp identity', async () => {
    const acc = await newAccount(t);
    const id = psid();
    const m = await receiveFrom(t, acc, 'messenger', id);
    const contactId = await contactOfConversation(t, acc, m.conversation_id);
    const taken = await createContact(acc);
    const conflict = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${contactId}`,
      payload: { phone: taken.phone },
    });
    expectError(conflict, 409);
    expect((await getContact(acc, contactId)).phone).toBeNull();
    expectError(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${contactId}`,
        payload: { phone: '+12' },
      }),
      422,
    );

    const phone = randomPhone();
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${contactId}`,
      payload: { phone },
    });
    expectStatus(res, 200);
    expect(res.json()).toMatchObject({
      phone,
      identities: [
        { channel: 'whatsapp', id: phone },
        { channel: 'messenger', id },
      ],
    });
    // The phone now finds this contact, as any phone does.
    const byPhone = await receive(acc, contactId, 'whatsapp');
    expect(await contactOfConversation(t, acc, byPhone.conversation_id)).toBe(contactId);
    const viaSandbox = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: { channel: 'whatsapp', phone, type: 'text', content: 'me again' },
    });
    expectStatus(viaSandbox, 201);
    expect(viaSandbox.json().conversation_id).toBe(byPhone.conversation_id);
  });

  it('lists and searches hold phone-less contacts: a name matches, a phone pattern skips them', async () => {
    const acc = await newAccount(t);
    const id = psid();
    const m = await receiveFrom(t, acc, 'instagram', id, { name: 'Zebediah Phoneless' });
    const phoneless = await contactOfConversation(t, acc, m.conversation_id);
    const withPhone = await createContact(acc);

    const all = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expectStatus(all, 200);
    expect(all.json().total).toBe(2);
    expect(
      all
        .json()
        .data.map((c: { id: string }) => c.id)
        .sort(),
    ).toEqual([phoneless, withPhone.id].sort());
    const listed = all.json().data.find((c: { id: string }) => c.id === phoneless);
    expect(listed).toEqual(await getContact(acc, phoneless));

    const byName = await acc.call({ method: 'GET', url: '/v1/contacts?search=zebediah' });
    expectStatus(byName, 200);
    expect(byName.json()).toMatchObject({ total: 1, data: [{ id: phoneless, phone: null }] });

    const byPhone = await acc.call({
      method: 'GET',
      url: `/v1/contacts?search=${encodeURIComponent(withPhone.phone.slice(1))}`,
    });
    expectStatus(byPhone, 200);
    expect(byPhone.json()).toMatchObject({ total: 1, data: [{ id: withPhone.id }] });

    const nothing = await acc.call({ method: 'GET', url: '/v1/contacts?search=%2B' });
    expectStatus(nothing, 200);
    expect(nothing.json().data.map((c: { id: string }) => c.id)).toEqual([withPhone.id]);
  });
});

describe('sending to contacts without an identity on the channel', () => {
  it('on a real messenger provider, a contact who never wrote there is a 422 that says why, with nothing written', async () => {
    const acc = await newAccount(real);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello {{1}}');
    for (const payload of [
      { contact_id: contact.id, channel: 'messenger', type: 'text', content: 'hi' },
      {
        contact_id: contact.id,
        channel: 'messenger',
        type: 'template',
        template_name: tpl.name,
        template_params: ['Ada'],
      },
    ]) {
      const res = await acc.call({ method: 'POST', url: '/v1/messages/send', payload });
      const error = expectError(res, 422, 'contact_id');
      expect(error.message).toBe(
        `contact ${contact.id} has no messenger identity: on messenger a contact must write first`,
      );
    }
    const conversations = await real.db
      .selectFrom('conversations')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(conversations).toEqual([]);
    expect(messenger.to(acc.accountId)).toEqual([]);
  });

  it('on a real messenger provider, a contact who wrote is sent to by its PSID', async () => {
    const acc = await newAccount(real);
    const id = psid();
    const m = await receiveFrom(real, acc, 'messenger', id);
    const contactId = await contactOfConversation(real, acc, m.conversation_id);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contactId, channel: 'messenger', type: 'text', content: 'hi' },
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ status: 'sent', conversation_id: m.conversation_id });
    expect(messenger.to(acc.accountId)).toEqual([{ contactId, phone: null, identity: id }]);
  });

  it('on a real whatsapp provider, a phone-less contact is a 422 ("has no phone"); a phone is sent as its digits', async () => {
    const acc = await newAccount(real);
    const tpl = await createTemplate(acc, 'Your order {{1}} is ready');
    const m = await receiveFrom(real, acc, 'messenger', psid());
    const phoneless = await contactOfConversation(real, acc, m.conversation_id);
    const payload = (contactId: string) => ({
      contact_id: contactId,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
      template_params: ['42'],
    });
    const refused = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: payload(phoneless),
    });
    const error = expectError(refused, 422, 'contact_id');
    expect(error.message).toMatch(new RegExp(`^contact ${phoneless} has no phone: `));
    expect(whatsapp.to(acc.accountId)).toEqual([]);

    const contact = await createContact(acc);
    const ok = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: payload(contact.id),
    });
    expectStatus(ok, 201);
    expect(whatsapp.to(acc.accountId)).toEqual([
      { contactId: contact.id, phone: contact.phone, identity: contact.phone.slice(1) },
    ]);
  });

  it('the sandbox keeps addressing every contact, with or without identities', async () => {
    const acc = await newAccount(t);
    const tpl = await createTemplate(acc, 'Hello {{1}}');
    const m = await receiveFrom(t, acc, 'messenger', psid());
    const phoneless = await contactOfConversation(t, acc, m.conversation_id);
    const withPhone = await createContact(acc);
    for (const [contactId, channel] of [
      [phoneless, 'whatsapp'],
      [phoneless, 'webchat'],
      [withPhone.id, 'messenger'],
      [withPhone.id, 'instagram'],
    ] as const) {
      const res = await acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: {
          contact_id: contactId,
          channel,
          type: 'template',
          template_name: tpl.name,
          template_params: ['x'],
        },
      });
      expectStatus(res, 201);
      expect(res.json().status).toBe('sent');
    }
  });

  it('a queued message read back for a retry carries its identity (findQueued)', async () => {
    const acc = await newAccount(real);
    const id = psid();
    const m = await receiveFrom(real, acc, 'messenger', id);
    const contactId = await contactOfConversation(real, acc, m.conversation_id);
    messenger.answer = { status: 'retry', reason: 'throttled' };
    try {
      const res = await acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: contactId, channel: 'messenger', type: 'text', content: 'hi' },
      });
      expectStatus(res, 201);
      expect(res.json().status).toBe('queued');
      const queued = await new MessagesRepository(real.db).findQueued(acc.accountId, [
        res.json().id,
      ]);
      expect(queued).toMatchObject([
        { channel: 'messenger', contactId, phone: null, identity: id },
      ]);
    } finally {
      messenger.answer = { status: 'accepted', providerMessageId: '' };
    }
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hi {{1}}');
    whatsapp.answer = { status: 'retry', reason: 'throttled' };
    try {
      const res = await acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: {
          contact_id: contact.id,
          channel: 'whatsapp',
          type: 'template',
          template_name: tpl.name,
          template_params: ['x'],
        },
      });
      expectStatus(res, 201);
      const queued = await new MessagesRepository(real.db).findQueued(acc.accountId, [
        res.json().id,
      ]);
      expect(queued).toMatchObject([
        { channel: 'whatsapp', phone: contact.phone, identity: contact.phone.slice(1) },
      ]);
    } finally {
      whatsapp.answer = { status: 'accepted', providerMessageId: '' };
    }
  });

  it('a broadcast on a real provider fails the recipients it cannot address, with the reason, and sends the rest', async () => {
    const acc = await newAccount(real);
    const tag = `fans_${randomBytes(3).toString('hex')}`;
    const tpl = await createTemplate(acc, 'News for {{1}}');
    const id = psid();
    const m = await receiveFrom(real, acc, 'messenger', id);
    const reachable = await contactOfConversation(real, acc, m.conversation_id);
    expectStatus(
      await acc.call({ method: 'PUT', url: `/v1/contacts/${reachable}`, payload: { tags: [tag] } }),
      200,
    );
    const unreachable = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), tags: [tag] },
    });
    expectStatus(unreachable, 201);
    const created = await acc.call({
      method: 'POST',
      url: '/v1/broadcasts',
      payload: {
        name: 'News',
        channel: 'messenger',
        audience: { tags: [tag] },
        message: { type: 'template', template_name: tpl.name, template_params: ['you'] },
      },
    });
    expectStatus(created, 201);
    const broadcastId = created.json().id;
    while ((await real.services.broadcasts.sendNextBatch(acc.accountId, broadcastId)) === 'more');

    const b = await acc.call({ method: 'GET', url: `/v1/broadcasts/${broadcastId}` });
    expectStatus(b, 200);
    expect(b.json()).toMatchObject({
      status: 'sent',
      stats: { sent: 1, failed: 1 },
    });
    expect(messenger.to(acc.accountId)).toEqual([
      { contactId: reachable, phone: null, identity: id },
    ]);
    const recipient = await real.db
      .selectFrom('broadcast_recipients')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .where('contact_id', '=', unreachable.json().id)
      .executeTakeFirstOrThrow();
    expect(recipient).toMatchObject({
      message_id: null,
      failure_reason: `contact ${unreachable.json().id} has no messenger identity: on messenger a contact must write first`,
    });
  });
});

describe('migration 010', () => {
  it('keeps every contact and conversation made before it, and phones stay unique', async () => {
    const base = testDatabaseUrl();
    const name = `switchboard_t_${randomBytes(6).toString('hex')}`;
    const admin = createDb(base, { max: 1, preparedStatements: false });
    await sql`CREATE DATABASE ${sql.id(name)}`.execute(admin);
    const url = new URL(base);
    url.pathname = `/${name}`;
    const db = createDb(url.toString(), { max: 2 });
    try {
      const before: Record<string, Migration> = {
        '001_foundation': m001,
        '002_inbox': m002,
        '003_webhooks': m003,
        '004_broadcasts': m004,
        '005_hot_queues': m005,
        '006_cache_notifications': m006,
        '007_dead_jobs_and_retention': m007,
        '008_channel_connections': m008,
        '009_connection_insert_notify': m009,
      };
      const migrated = await new Migrator({
        db,
        provider: { getMigrations: () => Promise.resolve(before) },
      }).migrateToLatest();
      expect(migrated.error).toBeUndefined();
      const now = new Date('2024-05-01T10:00:00Z');
      await sql`
        INSERT INTO contacts (account_id, id, phone, name, email, tags, lifecycle_stage, custom_fields, created_at, updated_at)
        VALUES ('acc_old', 'con_old', '+14155550100', 'Old', 'old@example.com', '{vip}', 'lead', '{"plan":"gold"}', ${now}, ${now})`.execute(
        db,
      );
      await sql`
        INSERT INTO conversations (account_id, id, contact_id, channel, status, created_at, updated_at)
        VALUES ('acc_old', 'conv_old', 'con_old', 'whatsapp', 'open', ${now}, ${now})`.execute(db);

      await migrate(db, sealForTests);

      const contact = await db
        .selectFrom('contacts')
        .selectAll()
        .where('account_id', '=', 'acc_old')
        .executeTakeFirstOrThrow();
      expect(contact).toEqual({
        account_id: 'acc_old',
        id: 'con_old',
        phone: '+14155550100',
        name: 'Old',
        email: 'old@example.com',
        tags: ['vip'],
        lifecycle_stage: 'lead',
        custom_fields: { plan: 'gold' },
        created_at: now,
        updated_at: now,
      });
      expect(
        await db.selectFrom('conversations').select(['id', 'contact_id', 'channel']).execute(),
      ).toEqual([{ id: 'conv_old', contact_id: 'con_old', channel: 'whatsapp' }]);
      // Phone-less contacts coexist; a phone still belongs to one contact.
      for (const id of ['con_a', 'con_b'])
        await sql`INSERT INTO contacts (account_id, id, phone, created_at, updated_at) VALUES ('acc_old', ${id}, NULL, ${now}, ${now})`.execute(
          db,
        );
      await expect(
        sql`INSERT INTO contacts (account_id, id, phone, created_at, updated_at) VALUES ('acc_old', 'con_c', '+14155550100', ${now}, ${now})`.execute(
          db,
        ),
      ).rejects.toMatchObject({ code: '23505' });
      // An identity names one contact per account and channel, and a contact has one per channel.
      const identity = (contactId: string, externalId: string) =>
        sql`INSERT INTO contact_identities (account_id, contact_id, channel, external_id, created_at) VALUES ('acc_old', ${contactId}, 'messenger', ${externalId}, ${now})`.execute(
          db,
        );
      await identity('con_a', 'p1');
      await expect(identity('con_b', 'p1')).rejects.toMatchObject({ code: '23505' });
      await expect(identity('con_a', 'p2')).rejects.toMatchObject({ code: '23505' });
      // WhatsApp's identity is the phone, never stored.
      await expect(
        sql`INSERT INTO contact_identities (account_id, contact_id, channel, external_id, created_at) VALUES ('acc_old', 'con_b', 'whatsapp', '14155550100', ${now})`.execute(
          db,
        ),
      ).rejects.toMatchObject({ code: '23514' });
    } finally {
      await db.destroy();
      await sql`DROP DATABASE IF EXISTS ${sql.id(name)} WITH (FORCE)`.execute(admin);
      await admin.destroy();
    }
  });
});
