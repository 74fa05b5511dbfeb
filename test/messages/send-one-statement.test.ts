import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue } from '../../src/jobs/job-queue.js';
import { newId } from '../../src/ids.js';
import { QueueRepository, type QueueSend } from '../../src/messages/sending/queue.repository.js';
import type { Channel } from '../../src/db/schema.js';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact, receive, sendJobsOf, withMessageRefused } from '../inbox-helpers.js';
import { slowProvider } from './slow-provider.js';

// API sends without an Idempotency-Key, all needing the 24-hour window or none (templates on
// WhatsApp, anything on webchat), are queued in one statement without a transaction
// (QueueRepository.queue). These tests hold it to the rules the
// transaction path keeps: who can be reached, one conversation per contact and channel, a
// message and its send job written together or not at all, one request's failure its own.

const { provider: slow } = slowProvider(10);

let t: TestApp;
let drop: () => Promise<void>;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  drop = db.drop;
  t = await startTestApp({ databaseUrl: db.url, providers: { webchat: slow } });
});
afterAll(async () => {
  await t.close();
  await drop();
});

describe('QueueRepository.queue', () => {
  const now = new Date('2026-11-24T12:00:00.000Z');
  const lease = new Date(now.getTime() + 60_000);

  function sendTo(
    accountId: string,
    contactId: string,
    channel: Channel,
    anyContact: boolean,
    content: string,
  ): Omit<QueueSend, 'windowed'> & Pick<Required<QueueSend>, 'job'> {
    const id = newId('msg');
    const [job] = new JobQueue({ now: () => now }).rowsOf([
      {
        accountId,
        kind: 'message.send',
        payload: { v: 1, message_ids: [id] },
        leasedUntil: lease,
      },
    ]);
    return {
      row: {
        account_id: accountId,
        id,
        direction: 'outbound',
        type: 'text',
        content,
        media_url: null,
        template_name: null,
        template_language: null,
        template_params: null,
        status: 'queued',
        failure_reason: null,
        provider_message_id: null,
        broadcast_id: null,
        author: null,
        created_at: now,
        updated_at: now,
      },
      contactId,
      channel,
      anyContact,
      job: job!,
    };
  }

  it('queues each reachable recipient with its job, in a conversation found, reopened or created; the rest leave nothing behind', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const withPhone = await createContact(acc);
    const phoneless = await createContact(acc);
    await t.db
      .updateTable('contacts')
      .set({ phone: null })
      .where('account_id', '=', acc.accountId)
      .where('id', '=', phoneless.id)
      .execute();
    // A contact with a resolved WhatsApp conversation: sending reopens that one.
    const returning = await createContact(acc);
    await receive(acc, returning.id, 'whatsapp');
    const existing = await t.db
      .updateTable('conversations')
      .set({ status: 'resolved' })
      .where('account_id', '=', acc.accountId)
      .where('contact_id', '=', returning.id)
      .returning('id')
      .executeTakeFirstOrThrow();
    const foreign = await createContact(other);

    const sends = [
      sendTo(acc.accountId, withPhone.id, 'whatsapp', false, 'one'),
      sendTo(acc.accountId, withPhone.id, 'whatsapp', false, 'two'),
      // No phone: a real WhatsApp provider cannot reach it; the sandbox can (on webchat here).
      sendTo(acc.accountId, phoneless.id, 'whatsapp', false, 'unreachable'),
      sendTo(acc.accountId, phoneless.id, 'webchat', true, 'sandboxed'),
      sendTo(acc.accountId, returning.id, 'whatsapp', false, 'again'),
      // Gone, and another account's contact named under this account: neither is found.
      sendTo(acc.accountId, 'con_missing', 'whatsapp', true, 'nobody'),
      sendTo(acc.accountId, foreign.id, 'whatsapp', true, 'not yours'),
    ];
    const found = await new QueueRepository().queue(
      t.db,
      sends.map((s) => ({ ...s, windowed: false })),
      now,
      { windowStart: now },
    );

    const byKey = new Map(found.map((a) => [`${a.contactId} ${a.channel}`, a]));
    expect(found).toHaveLength(4);
    expect(byKey.get(`${withPhone.id} whatsapp`)).toMatchObject({
      phone: withPhone.phone,
      conversationId: expect.stringMatching(/^conv_/),
    });
    expect(byKey.get(`${phoneless.id} whatsapp`)).toMatchObject({
      phone: null,
      reachable: false,
      conversationId: null,
    });
    expect(byKey.get(`${phoneless.id} webchat`)?.conversationId).toMatch(/^conv_/);
    expect(byKey.get(`${returning.id} whatsapp`)?.conversationId).toBe(existing.id);

    const messages = await t.db
      .selectFrom('messages')
      .select(['id', 'conversation_id', 'content', 'status', 'direction', 'created_at'])
      .where('account_id', '=', acc.accountId)
      .where('direction', '=', 'outbound')
      .orderBy('content')
      .execute();
    expect(messages.map((m) => m.content)).toEqual(['again', 'one', 'sandboxed', 'two']);
    for (const m of messages) {
      expect(m.status).toBe('queued');
      expect(m.created_at.toISOString()).toBe(now.toISOString());
    }
    const [again, one, sandboxed, two] = messages;
    expect(one!.conversation_id).toBe(two!.conversation_id);
    expect(one!.conversation_id).toBe(byKey.get(`${withPhone.id} whatsapp`)!.conversationId);
    expect(again!.conversation_id).toBe(existing.id);
    expect(sandboxed!.conversation_id).toBe(byKey.get(`${phoneless.id} webchat`)!.conversationId);

    // Each queued message has its own send job, held under the lease; no other job was written.
    const jobs = await t.db
      .selectFrom('jobs')
      .select(['id', 'kind', 'payload', 'locked_until', 'run_at', 'attempts'])
      .where('account_id', '=', acc.accountId)
      .where('kind', '=', 'message.send')
      .execute();
    expect(jobs).toHaveLength(4);
    const queuedIds = new Set(messages.map((m) => m.id));
    for (const job of jobs) {
      const sent = sends.find((s) => s.job.id === job.id)!;
      expect(queuedIds.has(sent.row.id)).toBe(true);
      expect(job.payload).toEqual({ v: 1, message_ids: [sent.row.id] });
      expect(job.locked_until?.toISOString()).toBe(lease.toISOString());
      expect(job.run_at.toISOString()).toBe(lease.toISOString());
      expect(job.attempts).toBe(1);
    }
    // The returning contact's conversation was reopened; the unreachable one got none.
    const conversations = await t.db
      .selectFrom('conversations')
      .select(['id', 'contact_id', 'channel', 'status'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(conversations.find((c) => c.id === existing.id)?.status).toBe('open');
    expect(
      conversations.filter((c) => c.contact_id === phoneless.id).map((c) => c.channel),
    ).toEqual(['webchat']);
    // Nothing was written in the other account.
    expect(
      await t.db
        .selectFrom('conversations')
        .select('id')
        .where('account_id', '=', other.accountId)
        .execute(),
    ).toEqual([]);
  });

  it('with a window: only a conversation whose contact wrote within it takes the message, and is touched; none is created', async () => {
    const acc = await newAccount(t);
    const wrote = await createContact(acc);
    const wroteLongAgo = await createContact(acc);
    const neverWrote = await createContact(acc);
    for (const c of [wrote, wroteLongAgo]) await receive(acc, c.id, 'whatsapp');
    const windowStart = new Date(now.getTime() - 24 * 3600_000);
    // Each conversation resolved, one last written to a second before the window opened.
    await t.db
      .updateTable('conversations')
      .set({ status: 'resolved', last_inbound_at: new Date(now.getTime() - 3600_000) })
      .where('account_id', '=', acc.accountId)
      .execute();
    await t.db
      .updateTable('conversations')
      .set({ last_inbound_at: new Date(windowStart.getTime() - 1000) })
      .where('account_id', '=', acc.accountId)
      .where('contact_id', '=', wroteLongAgo.id)
      .execute();
    const before = await t.db
      .selectFrom('conversations')
      .select(['id', 'contact_id', 'updated_at'])
      .where('account_id', '=', acc.accountId)
      .execute();

    const sends = [
      sendTo(acc.accountId, wrote.id, 'whatsapp', false, 'inside'),
      sendTo(acc.accountId, wroteLongAgo.id, 'whatsapp', false, 'too late'),
      sendTo(acc.accountId, neverWrote.id, 'whatsapp', false, 'never'),
    ];
    const found = await new QueueRepository().queue(
      t.db,
      sends.map((s) => ({ ...s, windowed: true })),
      now,
      { windowStart },
    );

    const byContact = new Map(found.map((a) => [a.contactId, a]));
    expect(found).toHaveLength(3);
    const inside = before.find((c) => c.contact_id === wrote.id)!;
    expect(byContact.get(wrote.id)).toMatchObject({ reachable: true, conversationId: inside.id });
    expect(byContact.get(wroteLongAgo.id)).toMatchObject({ reachable: true, conversationId: null });
    expect(byContact.get(neverWrote.id)).toMatchObject({ reachable: true, conversationId: null });

    const messages = await t.db
      .selectFrom('messages')
      .select(['id', 'conversation_id', 'content'])
      .where('account_id', '=', acc.accountId)
      .where('direction', '=', 'outbound')
      .execute();
    expect(messages).toEqual([
      { id: sends[0]!.row.id, conversation_id: inside.id, content: 'inside' },
    ]);
    expect((await sendJobsOf(t.db, acc.accountId)).map((j) => j.id)).toEqual([sends[0]!.job.id]);
    const after = await t.db
      .selectFrom('conversations')
      .select(['id', 'contact_id', 'status', 'updated_at'])
      .where('account_id', '=', acc.accountId)
      .orderBy('contact_id')
      .execute();
    // No conversation was created; only the one that took the message was reopened and touched.
    expect(after.map((c) => c.contact_id).sort()).toEqual([wrote.id, wroteLongAgo.id].sort());
    for (const c of after) {
      const was = before.find((b) => b.id === c.id)!;
      if (c.contact_id === wrote.id) {
        expect(c.status).toBe('open');
        expect(c.updated_at.toISOString()).toBe(now.toISOString());
      } else {
        expect(c.status).toBe('resolved');
        expect(c.updated_at.toISOString()).toBe(was.updated_at.toISOString());
      }
    }
  });
});

describe('POST /v1/messages/send without a transaction', () => {
  const send = (acc: Awaited<ReturnType<typeof newAccount>>, payload: object) =>
    acc.call({ method: 'POST', url: '/v1/messages/send', payload });

  it('a send that fails in the database fails alone: the rest of its statement is queued again and sent once', async () => {
    const acc = await newAccount(t);
    const contacts = await Promise.all(Array.from({ length: 12 }, () => createContact(acc)));
    await withMessageRefused(t.db, 'bang', async () => {
      const answers = await Promise.all(
        contacts.map((c, i) =>
          send(acc, {
            contact_id: c.id,
            channel: 'webchat',
            type: 'text',
            content: i === 7 ? 'bang' : 'fine',
          }),
        ),
      );
      for (const [i, res] of answers.entries()) {
        if (i === 7) expect(res.statusCode).toBeGreaterThanOrEqual(500);
        else expect(res.json(), res.body).toMatchObject({ status: 'sent', content: 'fine' });
      }
      const rows = await t.db
        .selectFrom('messages')
        .select(['content', 'status'])
        .where('account_id', '=', acc.accountId)
        .execute();
      expect(rows).toHaveLength(11);
      expect(rows.every((r) => r.content === 'fine' && r.status === 'sent')).toBe(true);
      // The refused send left no conversation, message or job behind, and the others' jobs are done.
      const conversations = await t.db
        .selectFrom('conversations')
        .select('contact_id')
        .where('account_id', '=', acc.accountId)
        .execute();
      expect(conversations.map((c) => c.contact_id)).not.toContain(contacts[7]!.id);
      expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
    });
  });

  it('text sends at once, inside and outside their windows: each its own answer, nothing written for a refusal', async () => {
    const acc = await newAccount(t);
    const inside = [];
    const outside = [];
    for (let i = 0; i < 6; i++) {
      const c = await createContact(acc);
      await receive(acc, c.id, 'whatsapp');
      inside.push(c);
      outside.push(await createContact(acc));
    }
    const text = (contactId: string, content: string) => ({
      contact_id: contactId,
      channel: 'whatsapp',
      type: 'text',
      content,
    });
    const answers = await Promise.all([
      ...inside.map((c) => send(acc, text(c.id, 'in'))),
      ...outside.map((c) => send(acc, text(c.id, 'out'))),
    ]);
    for (const res of answers.slice(0, 6))
      expect(res.json(), res.body).toMatchObject({ status: 'sent', content: 'in' });
    for (const res of answers.slice(6)) {
      expect(res.statusCode).toBe(422);
      expect(res.json().error.message).toMatch(/outside the 24-hour customer service window/);
    }
    const outbound = await t.db
      .selectFrom('messages')
      .select('content')
      .where('account_id', '=', acc.accountId)
      .where('direction', '=', 'outbound')
      .execute();
    expect(outbound.map((m) => m.content)).toEqual(Array(6).fill('in'));
    const withConversation = await t.db
      .selectFrom('conversations')
      .select('contact_id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(withConversation.map((c) => c.contact_id).sort()).toEqual(
      inside.map((c) => c.id).sort(),
    );
    expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
  });
});
