import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, type TestAccount, type TestApp } from '../helpers.js';
import {
  completedEvents,
  createBroadcast,
  createContact,
  createPrivateDatabase,
  createTemplate,
  expectError,
  expectStatus,
  freezeClock,
  getBroadcast,
  inbound,
  postBroadcast,
  jobsOf,
  messagesOf,
  recipientsOf,
  reviewTemplate,
  runnerOf,
  setStage,
  sleep,
  startAppOn,
  type BroadcastJson,
} from './broadcast-helpers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

// Batches of 2: every broadcast below with more than two recipients takes several batches.
let t: TestApp;
let dropDb: () => Promise<void>;
let dbUrl: string;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  dbUrl = db.url;
  t = await startAppOn(dbUrl, { broadcastBatchSize: 2 });
});
afterAll(async () => {
  await t?.close();
  await dropDb?.();
});

/** Runs every due job (this file's database has no other runner). */
async function drain(app: TestApp = t): Promise<number> {
  return runnerOf(app).drain();
}

/** Creates the broadcast, runs its jobs and returns it as GET shows it then. */
async function sendNow(
  acc: TestAccount,
  body: Parameters<typeof createBroadcast>[1],
): Promise<BroadcastJson> {
  const b = await createBroadcast(acc, body);
  await drain();
  return getBroadcast(acc, b.id);
}

async function recipientIds(acc: TestAccount, broadcastId: string): Promise<string[]> {
  return (await recipientsOf(t.db, acc.accountId, broadcastId)).map((r) => r.contact_id);
}

async function messagedContactIds(acc: TestAccount, broadcastId: string): Promise<string[]> {
  return (await messagesOf(t.db, acc.accountId, broadcastId)).map((m) => m.contact_id);
}

const sorted = (ids: string[]) => [...ids].sort();

async function setMessageStatus(
  acc: TestAccount,
  messageId: string,
  status: 'delivered' | 'read' | 'failed',
): Promise<void> {
  expectStatus(
    await acc.call({
      method: 'POST',
      url: `/v1/sandbox/messages/${messageId}/status`,
      payload: { status },
    }),
    200,
  );
}

describe('audience', () => {
  it('audience.tags selects the contacts having any of the tags', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const red = await createContact(acc, { tags: ['red'] });
    const blue = await createContact(acc, { tags: ['blue', 'x'] });
    const both = await createContact(acc, { tags: ['red', 'blue'] });
    await createContact(acc, { tags: ['green'] });
    await createContact(acc);
    await createContact(other, { tags: ['red'] });

    const b = await sendNow(acc, { audience: { tags: ['red', 'blue'] } });
    const expected = sorted([red.id, blue.id, both.id]);
    expect(b.status).toBe('sent');
    expect(b.stats).toEqual({ sent: 3, delivered: 0, read: 0, replied: 0, failed: 0 });
    expect(await recipientIds(acc, b.id)).toEqual(expected);
    expect(await messagedContactIds(acc, b.id)).toEqual(expected);
    expect(await messagesOf(t.db, other.accountId, b.id)).toEqual([]);
  });

  it('audience tags are trimmed and de-duplicated like stored tags: " vip" finds the contacts tagged "vip"', async () => {
    const acc = await newAccount(t);
    const vip = await createContact(acc, { tags: [' vip '] });
    await createContact(acc, { tags: ['other'] });

    const b = await sendNow(acc, { audience: { tags: [' vip', 'vip ', '\tvip'] } });
    expect(b.audience).toEqual({ tags: ['vip'] });
    expect(b.status).toBe('sent');
    expect(b.stats.sent).toBe(1);
    expect(await recipientIds(acc, b.id)).toEqual([vip.id]);

    const blank = await postBroadcast(acc, {
      name: 'Blank tag',
      channel: 'webchat',
      audience: { tags: ['vip', '   '] },
      message: { type: 'text', content: 'Hi' },
    });
    expectError(blank, 422, 'validation_error', 'audience.tags.1');
  });

  it('audience.lifecycle_stage selects the contacts in that stage now', async () => {
    const acc = await newAccount(t);
    const customer = await createContact(acc, { tags: ['a'] });
    const lead = await createContact(acc);
    const wasCustomer = await createContact(acc);
    await createContact(acc);
    await setStage(acc, customer.id, 'customer');
    await setStage(acc, lead.id, 'lead');
    await setStage(acc, wasCustomer.id, 'customer');
    await setStage(acc, wasCustomer.id, 'churned');

    const b = await sendNow(acc, { audience: { lifecycle_stage: 'customer' } });
    expect(b).toMatchObject({ status: 'sent', stats: { sent: 1, failed: 0 } });
    expect(await messagedContactIds(acc, b.id)).toEqual([customer.id]);
    const churned = await sendNow(acc, { audience: { lifecycle_stage: 'churned' } });
    expect(await messagedContactIds(acc, churned.id)).toEqual([wasCustomer.id]);
  });

  it('tags and lifecycle_stage together select contacts matching both (any tag AND the stage)', async () => {
    const acc = await newAccount(t);
    const redCustomer = await createContact(acc, { tags: ['red'] });
    const redLead = await createContact(acc, { tags: ['red'] });
    const blueCustomer = await createContact(acc, { tags: ['blue'] });
    const untaggedCustomer = await createContact(acc);
    await setStage(acc, redCustomer.id, 'customer');
    await setStage(acc, redLead.id, 'lead');
    await setStage(acc, blueCustomer.id, 'customer');
    await setStage(acc, untaggedCustomer.id, 'customer');

    const b = await sendNow(acc, {
      audience: { tags: ['red', 'blue'], lifecycle_stage: 'customer' },
    });
    expect(b.stats.sent).toBe(2);
    expect(await messagedContactIds(acc, b.id)).toEqual(sorted([redCustomer.id, blueCustomer.id]));
  });

  it("audience.all: true selects every contact of the account, and no other account's", async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const mine = [
      await createContact(acc, { tags: ['a'] }),
      await createContact(acc),
      await createContact(acc, { tags: ['b'] }),
    ];
    await setStage(acc, mine[1]!.id, 'lead');
    await createContact(other, { tags: ['a'] });

    const b = await sendNow(acc, { audience: { all: true } });
    expect(b).toMatchObject({ status: 'sent', stats: { sent: 3, failed: 0 } });
    expect(await messagedContactIds(acc, b.id)).toEqual(sorted(mine.map((c) => c.id)));
    const theirs = await t.db
      .selectFrom('messages')
      .select('id')
      .where('account_id', '=', other.accountId)
      .execute();
    expect(theirs).toEqual([]);
  });

  it('deleted contacts are not messaged', async () => {
    const acc = await newAccount(t);
    const keep = [
      await createContact(acc, { tags: ['vip'] }),
      await createContact(acc, { tags: ['vip'] }),
    ];
    const gone = await createContact(acc, { tags: ['vip'] });
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/contacts/${gone.id}` }), 200);

    const b = await sendNow(acc, { audience: { tags: ['vip'] } });
    expect(b.stats).toMatchObject({ sent: 2, failed: 0 });
    expect(await recipientIds(acc, b.id)).toEqual(sorted(keep.map((c) => c.id)));
    expect(await messagedContactIds(acc, b.id)).toEqual(sorted(keep.map((c) => c.id)));
    const all = await sendNow(acc, { audience: { all: true } });
    expect(await recipientIds(acc, all.id)).toEqual(sorted(keep.map((c) => c.id)));
  });

  it('contacts created after sending started are not included', async () => {
    const acc = await newAccount(t);
    const before = [
      await createContact(acc, { tags: ['vip'] }),
      await createContact(acc, { tags: ['vip'] }),
      await createContact(acc, { tags: ['vip'] }),
    ];
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] } });
    const broadcasts = t.services.broadcasts;

    expect(await broadcasts.sendNextBatch(acc.accountId, b.id)).toBe('more');
    expect(await recipientIds(acc, b.id)).toHaveLength(2);
    // Strictly later than the start, on the service's clock.
    while (t.clock.now().getTime() <= Date.parse(b.created_at)) await sleep(1);
    const late = await createContact(acc, { tags: ['vip'] });
    const lateAll = await createContact(acc);

    let steps = 0;
    while ((await broadcasts.sendNextBatch(acc.accountId, b.id)) === 'more')
      expect(++steps).toBeLessThan(10);
    const ids = sorted(before.map((c) => c.id));
    expect(await recipientIds(acc, b.id)).toEqual(ids);
    expect(await messagedContactIds(acc, b.id)).toEqual(ids);
    expect(ids).not.toContain(late.id);
    expect(await getBroadcast(acc, b.id)).toMatchObject({
      status: 'sent',
      stats: { sent: 3, failed: 0 },
    });
    await drain(); // its job finds it sent
    expect(await completedEvents(t.db, acc.accountId, b.id)).toHaveLength(1);
    expect(await recipientIds(acc, b.id)).toEqual(ids);
    // A broadcast started now does include them.
    const next = await sendNow(acc, { audience: { all: true } });
    expect(await recipientIds(acc, next.id)).toEqual(sorted([...ids, late.id, lateAll.id]));
  });

  it('a scheduled broadcast resolves its audience at its time, not when it was created', async () => {
    const acc = await newAccount(t);
    const early = await createContact(acc, { tags: ['vip'] });
    const thaw = freezeClock(t.clock);
    try {
      const at = t.clock.now().getTime() + 10 * MINUTE;
      const b = await createBroadcast(acc, {
        audience: { tags: ['vip'] },
        scheduled_at: new Date(at).toISOString(),
      });
      t.clock.advance(5 * MINUTE);
      const meanwhile = await createContact(acc, { tags: ['vip'] });
      const retagged = await createContact(acc);
      expectStatus(
        await acc.call({
          method: 'PUT',
          url: `/v1/contacts/${retagged.id}`,
          payload: { tags: ['vip'] },
        }),
        200,
      );
      t.clock.advance(5 * MINUTE);
      await drain();
      expect(await getBroadcast(acc, b.id)).toMatchObject({ status: 'sent', stats: { sent: 3 } });
      expect(await messagedContactIds(acc, b.id)).toEqual(
        sorted([early.id, meanwhile.id, retagged.id]),
      );
    } finally {
      thaw();
    }
  });
});

describe('sending', () => {
  it('zero recipients: the broadcast ends sent and broadcast.completed is emitted', async () => {
    const acc = await newAccount(t);
    await createContact(acc, { tags: ['other'] });
    const b = await sendNow(acc, { audience: { tags: ['nobody-has-this'] } });
    expect(b).toMatchObject({
      status: 'sent',
      stats: { sent: 0, delivered: 0, read: 0, replied: 0, failed: 0 },
    });
    expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([b]);
    expect(await recipientsOf(t.db, acc.accountId, b.id)).toEqual([]);
  });

  it('each recipient gets the message in its (contact, channel) conversation: existing reused, resolved reopened, missing created', async () => {
    const acc = await newAccount(t);
    const resolvedOne = await createContact(acc, { tags: ['vip'] });
    const openOne = await createContact(acc, { tags: ['vip'] });
    const fresh = await createContact(acc, { tags: ['vip'] });
    const resolvedConv = (await inbound(acc, resolvedOne.id, 'webchat', 'first')).conversation_id;
    const openConv = (await inbound(acc, openOne.id, 'webchat', 'hey')).conversation_id;
    const otherChannelConv = (await inbound(acc, resolvedOne.id, 'whatsapp', 'on whatsapp'))
      .conversation_id;
    const resolved = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${resolvedConv}/resolve`,
    });
    expect(resolved.json().status).toBe('resolved');

    const b = await sendNow(acc, {
      audience: { tags: ['vip'] },
      channel: 'webchat',
      message: { type: 'text', content: 'Sale today' },
    });
    expect(b.stats.sent).toBe(3);
    const byContact = new Map(
      (await recipientsOf(t.db, acc.accountId, b.id)).map((r) => [r.contact_id, r]),
    );
    expect(byContact.get(resolvedOne.id)!.conversation_id).toBe(resolvedConv);
    expect(byContact.get(openOne.id)!.conversation_id).toBe(openConv);

    const conv = async (id: string) => {
      const res = await acc.call({ method: 'GET', url: `/v1/conversations/${id}` });
      expectStatus(res, 200);
      return res.json();
    };
    const broadcastMessage = {
      direction: 'outbound',
      type: 'text',
      content: 'Sale today',
      status: 'sent',
    };
    const reopened = await conv(resolvedConv);
    expect(reopened).toMatchObject({
      contact_id: resolvedOne.id,
      channel: 'webchat',
      status: 'open',
    });
    expect(reopened.messages).toHaveLength(2);
    expect(reopened.messages[0]).toMatchObject({ direction: 'inbound', content: 'first' });
    expect(reopened.messages[1]).toMatchObject({
      ...broadcastMessage,
      id: byContact.get(resolvedOne.id)!.message_id,
      conversation_id: resolvedConv,
    });

    const kept = await conv(openConv);
    expect(kept.status).toBe('open');
    expect(kept.messages.map((m: { direction: string }) => m.direction)).toEqual([
      'inbound',
      'outbound',
    ]);
    expect(kept.messages[1]).toMatchObject(broadcastMessage);

    const freshConvId = byContact.get(fresh.id)!.conversation_id!;
    expect([resolvedConv, openConv, otherChannelConv]).not.toContain(freshConvId);
    const created = await conv(freshConvId);
    expect(created).toMatchObject({ contact_id: fresh.id, channel: 'webchat', status: 'open' });
    expect(created.messages).toHaveLength(1);
    expect(created.messages[0]).toMatchObject({
      ...broadcastMessage,
      id: byContact.get(fresh.id)!.message_id,
    });

    // The contact's conversation on another channel is untouched.
    const untouched = await conv(otherChannelConv);
    expect(untouched.messages.map((m: { direction: string }) => m.direction)).toEqual(['inbound']);
    // One conversation per (contact, channel): none was doubled.
    const convs = await t.db
      .selectFrom('conversations')
      .select(['contact_id', 'channel'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(convs).toHaveLength(4);
  });

  it('a template broadcast sends the rendered template to everyone, inside or outside the 24-hour window', async () => {
    const acc = await newAccount(t);
    const tpl = await createTemplate(acc, 'Hi {{1}}, use code {{2}}', 'approved');
    const inWindow = await createContact(acc, { tags: ['vip'] });
    const outside = await createContact(acc, { tags: ['vip'] });
    await inbound(acc, inWindow.id, 'whatsapp');
    const b = await sendNow(acc, {
      audience: { tags: ['vip'] },
      channel: 'whatsapp',
      message: { type: 'template', template_name: tpl.name, template_params: ['friend', 'SAVE10'] },
    });
    expect(b).toMatchObject({ status: 'sent', stats: { sent: 2, failed: 0 } });
    const messages = await messagesOf(t.db, acc.accountId, b.id);
    expect(sorted(messages.map((m) => m.contact_id))).toEqual(sorted([inWindow.id, outside.id]));
    for (const m of messages)
      expect(m).toMatchObject({
        direction: 'outbound',
        type: 'template',
        content: 'Hi friend, use code SAVE10',
        status: 'sent',
        channel: 'whatsapp',
      });
  });

  it('on whatsapp a text broadcast fails recipients outside the 24-hour window (stats.failed, reason kept) and sends to those inside', async () => {
    const acc = await newAccount(t);
    const stale = await createContact(acc, { tags: ['vip'] });
    const never = await createContact(acc, { tags: ['vip'] });
    const inside = await createContact(acc, { tags: ['vip'] });
    await inbound(acc, stale.id, 'whatsapp', 'long ago');
    t.clock.advance(24 * HOUR + MINUTE);
    await inbound(acc, inside.id, 'whatsapp', 'recent');
    await inbound(acc, never.id, 'webchat', 'on another channel'); // opens no whatsapp window

    const b = await sendNow(acc, {
      audience: { tags: ['vip'] },
      channel: 'whatsapp',
      message: { type: 'text', content: 'Flash sale' },
    });
    expect(b).toMatchObject({
      status: 'sent',
      stats: { sent: 1, delivered: 0, read: 0, replied: 0, failed: 2 },
    });
    expect(await messagedContactIds(acc, b.id)).toEqual([inside.id]);
    const byContact = new Map(
      (await recipientsOf(t.db, acc.accountId, b.id)).map((r) => [r.contact_id, r]),
    );
    expect([...byContact.keys()].sort()).toEqual(sorted([stale.id, never.id, inside.id]));
    for (const c of [stale, never]) {
      expect(byContact.get(c.id)!.message_id).toBeNull();
      expect(byContact.get(c.id)!.failure_reason).toMatch(/24-hour/);
    }
    expect(byContact.get(inside.id)!.failure_reason).toBeNull();
    expect(byContact.get(inside.id)!.message_id).toEqual(expect.stringMatching(/^msg_/));
    // The stale contact's whatsapp conversation got no outbound message.
    const staleMessages = await t.db
      .selectFrom('messages as m')
      .innerJoin('conversations as c', (j) =>
        j.onRef('c.account_id', '=', 'm.account_id').onRef('c.id', '=', 'm.conversation_id'),
      )
      .select('m.direction')
      .where('m.account_id', '=', acc.accountId)
      .where('c.contact_id', '=', stale.id)
      .execute();
    expect(staleMessages.map((m) => m.direction)).toEqual(['inbound']);
    // The inbound that opened the window came before the message: not a reply.
    expect((await getBroadcast(acc, b.id)).stats.replied).toBe(0);
  });

  it('when every recipient fails the broadcast ends failed, and broadcast.completed is still emitted', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 3; i++) await createContact(acc, { tags: ['vip'] });
    const b = await sendNow(acc, {
      audience: { tags: ['vip'] },
      channel: 'whatsapp',
      message: { type: 'text', content: 'No window' },
    });
    expect(b).toMatchObject({
      status: 'failed',
      stats: { sent: 0, delivered: 0, read: 0, replied: 0, failed: 3 },
    });
    expect(await messagesOf(t.db, acc.accountId, b.id)).toEqual([]);
    expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([b]);
  });

  it('a template broadcast whose template is rejected (or deleted) before its time ends failed: nothing sent, no broadcast.completed', async () => {
    const acc = await newAccount(t);
    await createContact(acc, { tags: ['vip'] });
    await createContact(acc, { tags: ['vip'] });
    const rejectedTpl = await createTemplate(acc, 'Hello', 'approved');
    const deletedTpl = await createTemplate(acc, 'Hello', 'approved');
    const at = new Date(t.clock.now().getTime() + 6 * MINUTE).toISOString();
    const rejected = await createBroadcast(acc, {
      audience: { tags: ['vip'] },
      channel: 'whatsapp',
      message: { type: 'template', template_name: rejectedTpl.name },
      scheduled_at: at,
    });
    const deleted = await createBroadcast(acc, {
      audience: { tags: ['vip'] },
      channel: 'whatsapp',
      message: { type: 'template', template_name: deletedTpl.name },
      scheduled_at: at,
    });
    await reviewTemplate(acc, rejectedTpl.id, 'rejected');
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${deletedTpl.id}` }), 200);

    t.clock.advance(6 * MINUTE + 1000);
    await drain();
    for (const b of [rejected, deleted]) {
      expect(await getBroadcast(acc, b.id)).toMatchObject({
        status: 'failed',
        stats: { sent: 0, delivered: 0, read: 0, replied: 0, failed: 0 },
      });
      expect(await recipientsOf(t.db, acc.accountId, b.id)).toEqual([]);
      expect(await messagesOf(t.db, acc.accountId, b.id)).toEqual([]);
      expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([]);
    }
    const failed = (await acc.call({ method: 'GET', url: '/v1/broadcasts?status=failed' })).json();
    expect(failed.total).toBe(2);
  });

  it('broadcast.completed is emitted exactly once, with data equal to GET /v1/broadcasts/{id} after completion', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 5; i++) await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] } });
    expect(await t.services.broadcasts.sendNextBatch(acc.accountId, b.id)).toBe('more');
    expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([]); // not while sending
    await drain();
    const done = await getBroadcast(acc, b.id);
    expect(done).toMatchObject({ status: 'sent', stats: { sent: 5, failed: 0 } });
    expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([done]);
    // Running it again (a repeated job, a second worker) emits nothing more.
    expect(await t.services.broadcasts.sendNextBatch(acc.accountId, b.id)).toBe('done');
    await drain();
    expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([done]);
    const types = await t.db
      .selectFrom('events')
      .select('type')
      .where('account_id', '=', acc.accountId)
      .where('type', '=', 'broadcast.completed')
      .execute();
    expect(types).toHaveLength(1);
  });
});

describe('message.created', () => {
  it("each message a batch queues has one, without actor, equal to the message as the API shows it when stored, in the batch's transaction", async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 3; i++) await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] } });
    await drain();
    expect((await getBroadcast(acc, b.id)).stats.sent).toBe(3);

    const { rows: events } = await sql<{ data: string; xmin: string }>`
      SELECT data::text AS data, xmin::text AS xmin FROM events
      WHERE account_id = ${acc.accountId} AND type = 'message.created' ORDER BY seq`.execute(t.db);
    const messages = await messagesOf(t.db, acc.accountId, b.id);
    expect(events).toHaveLength(3);
    for (const m of messages) {
      const conversation = await acc.call({
        method: 'GET',
        url: `/v1/conversations/${m.conversation_id}`,
      });
      expectStatus(conversation, 200);
      const shown = (conversation.json().messages as { id: string }[]).find((x) => x.id === m.id);
      // Stored queued; the provider has answered since.
      const stored = JSON.stringify({ ...shown, status: 'queued' });
      const event = events.find((e) => (JSON.parse(e.data) as { id: string }).id === m.id);
      expect(JSON.stringify(JSON.parse(event!.data))).toBe(stored);
      const { rows } = await sql<{ x: string }>`
        SELECT xmin::text AS x FROM broadcast_recipients
        WHERE account_id = ${acc.accountId} AND broadcast_id = ${b.id}
          AND contact_id = ${m.contact_id}`.execute(t.db);
      expect(event!.xmin).toBe(rows[0]!.x);
    }
  });
});

describe('cancel', () => {
  it('cancelling a scheduled broadcast returns it to draft (200); when its time passes nothing is sent', async () => {
    const acc = await newAccount(t);
    await createContact(acc, { tags: ['vip'] });
    const at = new Date(t.clock.now().getTime() + 10 * MINUTE).toISOString();
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] }, scheduled_at: at });
    const res = await acc.call({ method: 'POST', url: `/v1/broadcasts/${b.id}/cancel` });
    expectStatus(res, 200);
    expect(res.json()).toEqual({ ...b, status: 'draft' });

    t.clock.advance(11 * MINUTE);
    await drain();
    expect(await getBroadcast(acc, b.id)).toEqual({ ...b, status: 'draft' });
    expect(await recipientsOf(t.db, acc.accountId, b.id)).toEqual([]);
    expect(await messagesOf(t.db, acc.accountId, b.id)).toEqual([]);
    expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([]);
  });

  it('cancelling a sending, sent or draft broadcast is a 409; an unknown one a 404', async () => {
    const acc = await newAccount(t);
    await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] } });
    expectError(
      await acc.call({ method: 'POST', url: `/v1/broadcasts/${b.id}/cancel` }),
      409,
      'conflict',
    );
    expect((await getBroadcast(acc, b.id)).status).toBe('sending');
    await drain();
    expect((await getBroadcast(acc, b.id)).status).toBe('sent');
    expectError(
      await acc.call({ method: 'POST', url: `/v1/broadcasts/${b.id}/cancel` }),
      409,
      'conflict',
    );

    const s = await createBroadcast(acc, {
      audience: { tags: ['vip'] },
      scheduled_at: new Date(t.clock.now().getTime() + HOUR).toISOString(),
    });
    expectStatus(await acc.call({ method: 'POST', url: `/v1/broadcasts/${s.id}/cancel` }), 200);
    expectError(
      await acc.call({ method: 'POST', url: `/v1/broadcasts/${s.id}/cancel` }),
      409,
      'conflict',
    );
    expectError(
      await acc.call({
        method: 'POST',
        url: '/v1/broadcasts/bc_01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel',
      }),
      404,
      'not_found',
    );
  });
});

describe('scheduler', () => {
  it('a scheduled broadcast does nothing before its time and sends at its time', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 3; i++) await createContact(acc, { tags: ['vip'] });
    const thaw = freezeClock(t.clock);
    try {
      const at = t.clock.now().getTime() + 6 * MINUTE + 123;
      const b = await createBroadcast(acc, {
        audience: { tags: ['vip'] },
        scheduled_at: new Date(at).toISOString(),
      });
      const [job] = await jobsOf(t.db, acc.accountId);
      expect(job).toMatchObject({ kind: 'broadcast.send', payload: { v: 1, broadcast_id: b.id } });
      expect(job!.run_at.getTime()).toBe(at);

      t.clock.advance(at - 1 - t.clock.now().getTime());
      await drain();
      expect(await getBroadcast(acc, b.id)).toMatchObject({
        status: 'scheduled',
        stats: { sent: 0 },
      });
      expect(await recipientsOf(t.db, acc.accountId, b.id)).toEqual([]);
      expect((await jobsOf(t.db, acc.accountId))[0]).toMatchObject({
        attempts: 0,
        locked_until: null,
      });

      t.clock.advance(1);
      await drain();
      expect(await getBroadcast(acc, b.id)).toMatchObject({
        status: 'sent',
        stats: { sent: 3, failed: 0 },
      });
      expect(await completedEvents(t.db, acc.accountId, b.id)).toHaveLength(1);
      expect(await jobsOf(t.db, acc.accountId)).toEqual([]);
    } finally {
      thaw();
    }
  });

  it("the send job's run_at is exactly scheduled_at, even though time passes while the request runs", async () => {
    const acc = await newAccount(t);
    // Every reading of the clock is 1 ms later than the one before.
    const thaw = freezeClock(t.clock, { tickMs: 1 });
    let id: string;
    try {
      const at = t.clock.now().getTime() + 6 * MINUTE;
      const b = await createBroadcast(acc, {
        audience: { all: true },
        scheduled_at: new Date(at).toISOString(),
      });
      id = b.id;
      expect(b.scheduled_at).toBe(new Date(at).toISOString());
      const jobs = await jobsOf(t.db, acc.accountId);
      expect(jobs.map((j) => j.run_at.getTime())).toEqual([at]);
    } finally {
      thaw();
    }
    expectStatus(await acc.call({ method: 'POST', url: `/v1/broadcasts/${id}/cancel` }), 200);
  });

  it('a runner started after a downtime sends an overdue scheduled broadcast at once, to the audience of its time', async () => {
    const acc = await newAccount(t);
    const before = [
      await createContact(acc, { tags: ['vip'] }),
      await createContact(acc, { tags: ['vip'] }),
    ];
    const thaw = freezeClock(t.clock);
    try {
      const at = t.clock.now().getTime() + 6 * MINUTE;
      const b = await createBroadcast(acc, {
        audience: { tags: ['vip'] },
        scheduled_at: new Date(at).toISOString(),
      });
      t.clock.advance(6 * MINUTE + 1); // no runner ran meanwhile
      const afterItsTime = await createContact(acc, { tags: ['vip'] });
      t.clock.advance(3 * HOUR);
      expect(await runnerOf(t).drain(1)).toBeGreaterThanOrEqual(1);
      expect(await getBroadcast(acc, b.id)).toMatchObject({ status: 'sent', stats: { sent: 2 } });
      expect(await messagedContactIds(acc, b.id)).toEqual(sorted(before.map((c) => c.id)));
      expect(before.map((c) => c.id)).not.toContain(afterItsTime.id);
    } finally {
      thaw();
    }
  });
});

describe('pacing', () => {
  let paced: TestApp;
  beforeAll(async () => {
    paced = await startAppOn(dbUrl, {
      broadcastRatePerSecond: { whatsapp: 0, instagram: 0, messenger: 0, webchat: 2 },
      broadcastBatchSize: 500,
    });
  });
  afterAll(() => paced?.close());

  it('at 2 messages per second on webchat, one drain round sends 2 recipients and the job comes due again ~1 s later', async () => {
    const acc = await newAccount(paced);
    for (let i = 0; i < 5; i++) await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] }, channel: 'webchat' });
    const runner = runnerOf(paced);
    const count = async () => (await recipientsOf(paced.db, acc.accountId, b.id)).length;

    const before = paced.clock.now().getTime();
    await runner.drain();
    const after = paced.clock.now().getTime();
    expect(await count()).toBe(2);
    expect(await getBroadcast(acc, b.id)).toMatchObject({ status: 'sending', stats: { sent: 2 } });
    const [job] = await jobsOf(paced.db, acc.accountId);
    expect(job).toMatchObject({ kind: 'broadcast.send', attempts: 0, locked_until: null });
    // A batch of 2 at 2/s takes at least 1 s from its start: the next one is due 1 s after it began.
    expect(job!.run_at.getTime()).toBeGreaterThanOrEqual(before + 1000 - 5);
    expect(job!.run_at.getTime()).toBeLessThanOrEqual(after + 1000);

    // Not due yet on this clock: nothing more is sent.
    if (job!.run_at.getTime() > paced.clock.now().getTime() + 50) {
      await runner.drain();
      expect(await count()).toBe(2);
    }
    paced.clock.advance(1000);
    await runner.drain();
    expect(await count()).toBe(4);
    for (let i = 0; i < 5 && (await getBroadcast(acc, b.id)).status === 'sending'; i++) {
      paced.clock.advance(1000);
      await runner.drain();
    }
    expect(await getBroadcast(acc, b.id)).toMatchObject({ status: 'sent', stats: { sent: 5 } });
  });

  it('two broadcasts on one channel share its rate: together 2 messages a second, not 2 each, taking turns', async () => {
    const acc = await newAccount(paced);
    for (let i = 0; i < 6; i++) await createContact(acc, { tags: ['a'] });
    for (let i = 0; i < 6; i++) await createContact(acc, { tags: ['b'] });
    const first = await createBroadcast(acc, { audience: { tags: ['a'] }, channel: 'webchat' });
    const second = await createBroadcast(acc, { audience: { tags: ['b'] }, channel: 'webchat' });
    const runner = runnerOf(paced);
    const sent = async () =>
      (await recipientsOf(paced.db, acc.accountId, first.id)).length +
      (await recipientsOf(paced.db, acc.accountId, second.id)).length;
    const thaw = freezeClock(paced.clock);
    try {
      await runner.drain();
      expect(await sent()).toBe(2);
      // The other broadcast waits for the channel, due when it is free.
      const jobs = await jobsOf(paced.db, acc.accountId);
      expect(jobs).toHaveLength(2);
      for (const job of jobs)
        expect(job.run_at.getTime()).toBeGreaterThan(paced.clock.now().getTime());
      for (let round = 1; round <= 3; round++) {
        // The waiting broadcast falls due a moment (20 ms) before the channel is free, the one
        // that holds it when it is: on a running clock the first is claimed first.
        paced.clock.advance(980);
        await runner.drain();
        paced.clock.advance(20);
        await runner.drain();
        expect(await sent()).toBe(2 + 2 * round);
        // Turns: neither broadcast is ever more than a batch ahead of the other.
        const [a, b] = [
          (await recipientsOf(paced.db, acc.accountId, first.id)).length,
          (await recipientsOf(paced.db, acc.accountId, second.id)).length,
        ];
        expect(Math.abs(a - b)).toBeLessThanOrEqual(2);
      }
      // Another account's channel is its own.
      const other = await newAccount(paced);
      for (let i = 0; i < 2; i++) await createContact(other, { tags: ['a'] });
      const theirs = await createBroadcast(other, {
        audience: { tags: ['a'] },
        channel: 'webchat',
      });
      await runnerOf(paced).drain();
      expect(await recipientsOf(paced.db, other.accountId, theirs.id)).toHaveLength(2);
    } finally {
      thaw();
    }
  });

  it('a channel without a rate sends a whole batch in one go', async () => {
    const acc = await newAccount(paced);
    const tpl = await createTemplate(acc, 'Hi', 'approved');
    for (let i = 0; i < 5; i++) await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, {
      audience: { tags: ['vip'] },
      channel: 'instagram',
      message: { type: 'template', template_name: tpl.name },
    });
    expect(await paced.services.broadcasts.sendNextBatch(acc.accountId, b.id)).toBe('more');
    expect(await recipientsOf(paced.db, acc.accountId, b.id)).toHaveLength(5);
    await runnerOf(paced).drain();
    expect(await getBroadcast(acc, b.id)).toMatchObject({ status: 'sent', stats: { sent: 5 } });
  });
});

describe('stats', () => {
  it('a funnel: sent→delivered, delivered→read, sent→read, failed after acceptance; repeated updates change nothing', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 5; i++) await createContact(acc, { tags: ['vip'] });
    const b = await sendNow(acc, { audience: { tags: ['vip'] } });
    const [m1, m2, m3, m4, m5] = (await recipientsOf(t.db, acc.accountId, b.id)).map(
      (r) => r.message_id!,
    );
    const stats = async () => {
      const s = (await getBroadcast(acc, b.id)).stats;
      expect(s.sent).toBeGreaterThanOrEqual(s.delivered);
      expect(s.delivered).toBeGreaterThanOrEqual(s.read);
      return s;
    };
    expect(await stats()).toEqual({ sent: 5, delivered: 0, read: 0, replied: 0, failed: 0 });

    await setMessageStatus(acc, m1!, 'delivered');
    expect(await stats()).toEqual({ sent: 5, delivered: 1, read: 0, replied: 0, failed: 0 });
    await setMessageStatus(acc, m1!, 'read');
    expect(await stats()).toEqual({ sent: 5, delivered: 1, read: 1, replied: 0, failed: 0 });
    await setMessageStatus(acc, m2!, 'read'); // straight from sent
    expect(await stats()).toEqual({ sent: 5, delivered: 2, read: 2, replied: 0, failed: 0 });
    await setMessageStatus(acc, m3!, 'failed'); // after acceptance: still counted sent
    expect(await stats()).toEqual({ sent: 5, delivered: 2, read: 2, replied: 0, failed: 1 });
    await setMessageStatus(acc, m4!, 'delivered');
    await setMessageStatus(acc, m4!, 'failed'); // stays counted delivered
    expect(await stats()).toEqual({ sent: 5, delivered: 3, read: 2, replied: 0, failed: 2 });

    // Repeated, late and after-failure updates.
    await setMessageStatus(acc, m1!, 'delivered');
    await setMessageStatus(acc, m1!, 'read');
    await setMessageStatus(acc, m2!, 'delivered');
    await setMessageStatus(acc, m2!, 'failed');
    await setMessageStatus(acc, m3!, 'failed');
    await setMessageStatus(acc, m3!, 'delivered');
    await setMessageStatus(acc, m3!, 'read');
    await setMessageStatus(acc, m4!, 'read');
    expect(await stats()).toEqual({ sent: 5, delivered: 3, read: 2, replied: 0, failed: 2 });
    await setMessageStatus(acc, m5!, 'delivered');
    await setMessageStatus(acc, m5!, 'delivered');
    expect(await stats()).toEqual({ sent: 5, delivered: 4, read: 2, replied: 0, failed: 2 });
  });

  it('replied counts a contact once, only for inbound messages in its conversation after the broadcast message', async () => {
    const acc = await newAccount(t);
    const a = await createContact(acc, { tags: ['vip'] });
    const bee = await createContact(acc, { tags: ['vip'] });
    const c = await createContact(acc, { tags: ['vip'] });
    const outsider = await createContact(acc, { tags: ['other'] });
    await inbound(acc, a.id, 'webchat', 'before the broadcast');
    const first = await sendNow(acc, { audience: { tags: ['vip'] }, channel: 'webchat' });
    expect(first.stats).toMatchObject({ sent: 3, replied: 0 });

    await inbound(acc, a.id, 'webchat', 'thanks');
    await inbound(acc, a.id, 'webchat', 'really, thanks');
    expect((await getBroadcast(acc, first.id)).stats.replied).toBe(1);
    for (let i = 0; i < 3; i++) await inbound(acc, bee.id, 'webchat', `reply ${i}`);
    expect((await getBroadcast(acc, first.id)).stats.replied).toBe(2);
    await inbound(acc, outsider.id, 'webchat', 'not in the audience');
    await inbound(acc, c.id, 'whatsapp', 'another conversation');
    expect((await getBroadcast(acc, first.id)).stats).toEqual({
      sent: 3,
      delivered: 0,
      read: 0,
      replied: 2,
      failed: 0,
    });

    // A later broadcast counts only replies after its own message.
    const second = await sendNow(acc, { audience: { tags: ['vip'] }, channel: 'webchat' });
    expect(second.stats.replied).toBe(0);
    await inbound(acc, a.id, 'webchat', 'and again');
    expect((await getBroadcast(acc, second.id)).stats.replied).toBe(1);
    expect((await getBroadcast(acc, first.id)).stats.replied).toBe(2);
    await inbound(acc, c.id, 'webchat', 'finally');
    expect((await getBroadcast(acc, first.id)).stats.replied).toBe(3);
    expect((await getBroadcast(acc, second.id)).stats.replied).toBe(2);
  });
});
