/**
 * Inbound webhooks under load: stored webhooks are processed right after their commit by the
 * process that stored them, several at once, their plain messages recorded together by one
 * receiveMany transaction. These tests hold that path to what one webhook at a time does.
 */
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { randomPhone } from '../helpers.js';
import {
  inboundWebhook,
  postSignedWebhook,
  statusWebhook,
  waMessage,
  wamid,
  waStatus,
} from '../fake-graph/webhooks.js';
import {
  business,
  connectedAccount,
  createContact,
  drain,
  events,
  jobsOf,
  messageRow,
  sentText,
  startE2E,
  type Connected,
  type E2E,
} from './whatsapp-e2e-helpers.js';

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => {
  vi.restoreAllMocks();
  e.graph.reset();
});
afterAll(() => e?.close());

const waIdOf = (phone: string) => phone.slice(1);

function text(
  c: Connected,
  from: { phone: string; name: string },
  ...messages: Array<{ text: string; id?: string }>
) {
  return inboundWebhook(
    business(c),
    { waId: waIdOf(from.phone), name: from.name },
    ...messages.map((m) => waMessage.text(waIdOf(from.phone), m.text, m.id ?? wamid())),
  );
}

/** Posts every webhook at once; each is answered 200 once stored. */
async function deliverAll(c: Connected, payloads: Record<string, unknown>[]): Promise<void> {
  const answers = await Promise.all(
    payloads.map((p) => postSignedWebhook(c.webhookUrl, p, c.appSecret)),
  );
  for (const res of answers) expect(res.status, res.body).toBe(200);
}

async function inboundRows(accountId: string) {
  return e.t.db
    .selectFrom('messages')
    .select(['id', 'conversation_id', 'content', 'provider_message_id'])
    .where('account_id', '=', accountId)
    .where('direction', '=', 'inbound')
    .orderBy('id')
    .execute();
}

async function webhooksOf(accountId: string) {
  return e.t.db
    .selectFrom('inbound_webhooks')
    .select(['id', 'processed_at'])
    .where('account_id', '=', accountId)
    .execute();
}

describe('delivery reports processed together', () => {
  it('move each message forward only, each move once with its event, and hold back a webhook naming a message not known yet', async () => {
    const c = await connectedAccount(e);
    const [a, b, f] = [await sentText(e, c), await sentText(e, c), await sentText(e, c)];
    const statusMany = vi.spyOn(e.t.services.messages, 'applyProviderStatusMany');
    const unknown = wamid();
    const failed = waStatus.failed(f.wamid, f.to, {
      code: 131026,
      title: 'Message undeliverable',
    });
    await deliverAll(c, [
      // In order in one webhook, and Meta's duplicate of the first in another (whichever comes
      // first, delivered moves once, then read).
      statusWebhook(business(c), waStatus.delivered(a.wamid, a.to), waStatus.read(a.wamid, a.to)),
      statusWebhook(business(c), waStatus.delivered(a.wamid, a.to)),
      // Out of order in one webhook: read first, so the delivered after it changes nothing.
      statusWebhook(
        business(c),
        waStatus.read(b.wamid, b.to),
        waStatus.delivered(b.wamid, b.to),
        waStatus.sent(b.wamid, b.to),
      ),
      statusWebhook(business(c), failed),
      statusWebhook(business(c), failed, waStatus.read(unknown, f.to)),
    ]);
    await drain(e, c.acc.accountId);
    expect(Math.max(...statusMany.mock.calls.map(([, us]) => us.length))).toBeGreaterThan(1);

    expect(await messageRow(e, c.acc.accountId, a.id)).toMatchObject({ status: 'read' });
    expect(await messageRow(e, c.acc.accountId, b.id)).toMatchObject({ status: 'read' });
    expect(await messageRow(e, c.acc.accountId, f.id)).toMatchObject({
      status: 'failed',
      failure_reason: '(#131026) Message undeliverable',
    });
    const moves = (await events(e, c.acc.accountId))
      .filter((x) => ['message.delivered', 'message.read', 'message.failed'].includes(x.type))
      .map((x) => {
        const data = x.data as { id: string; status: string; failure_reason: string | null };
        return [x.type, data.id, data.status, data.failure_reason];
      });
    expect(moves.sort()).toEqual(
      [
        ['message.delivered', a.id, 'delivered', null],
        ['message.read', a.id, 'read', null],
        ['message.read', b.id, 'read', null],
        ['message.failed', f.id, 'failed', '(#131026) Message undeliverable'],
      ].sort(),
    );
    // Delivered before read for the same message, as they were applied.
    const aEvents = (await events(e, c.acc.accountId))
      .filter((x) => (x.data as { id: string }).id === a.id)
      .map((x) => x.type)
      .filter((t) => t !== 'message.received' && t !== 'message.created');
    expect(aEvents).toEqual(['message.delivered', 'message.read']);

    // The webhook naming an unknown message waits for it: its job is due again later.
    const [job, ...more] = await jobsOf(e, c.acc.accountId, 'channel.inbound');
    expect(more).toEqual([]);
    expect(job).toMatchObject({ attempts: 1, locked_until: null, dead_at: null });
    const stored = await webhooksOf(c.acc.accountId);
    expect(stored.filter((w) => w.processed_at === null)).toHaveLength(1);
  });
});

describe('webhooks processed together', () => {
  it('record what one at a time would: one contact per sender, each message once and in order, with its events', async () => {
    const c = await connectedAccount(e);
    const acc = c.acc;
    // A sender the account knows already (their name stays theirs), with a resolved conversation.
    const known = await createContact(acc);
    const renamed = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${known.id}`,
      payload: { name: 'Known Name' },
    });
    expect(renamed.statusCode, renamed.body).toBe(200);
    const ada = { phone: randomPhone(), name: 'Ada' };
    const bob = { phone: randomPhone(), name: 'Bob' };
    const kim = { phone: known.phone, name: 'Profile Name' };
    const receiveMany = vi.spyOn(e.t.services.messages, 'receiveMany');

    const repeated = wamid();
    const payloads = [
      text(c, ada, { text: 'ada 1' }),
      text(c, bob, { text: 'bob 1' }, { text: 'bob 2' }),
      text(c, kim, { text: 'kim 1' }),
      text(c, ada, { text: 'ada 2', id: repeated }),
      // Meta's retry of the same message, in another delivery.
      text(c, ada, { text: 'ada 2', id: repeated }),
      // A sender whose id is no phone number is skipped; the message beside it is kept.
      text(c, ada, { text: 'ada 3' }),
      text(c, { phone: '+999', name: 'Nobody' }, { text: 'never kept' }),
      ...Array.from({ length: 12 }, (_, i) => text(c, bob, { text: `bob ${i + 3}` })),
    ];
    await deliverAll(c, payloads);
    await drain(e, acc.accountId);

    // Grouped: at least one call recorded several webhooks' messages.
    expect(Math.max(...receiveMany.mock.calls.map(([, ms]) => ms.length))).toBeGreaterThan(1);

    const contacts = await e.t.db
      .selectFrom('contacts')
      .select(['id', 'phone', 'name'])
      .where('account_id', '=', acc.accountId)
      .orderBy('phone')
      .execute();
    expect(contacts).toHaveLength(3);
    const byPhone = new Map(contacts.map((x) => [x.phone, x]));
    expect(byPhone.get(ada.phone)?.name).toBe('Ada');
    expect(byPhone.get(bob.phone)?.name).toBe('Bob');
    expect(byPhone.get(known.phone)).toEqual({
      id: known.id,
      phone: known.phone,
      name: 'Known Name',
    });
    const created = await events(e, acc.accountId, 'contact.created');
    // The known contact's own creation, then Ada's and Bob's, once each.
    expect(created.map((x) => (x.data as { phone: string }).phone).sort()).toEqual(
      [known.phone, ada.phone, bob.phone].sort(),
    );

    const rows = await inboundRows(acc.accountId);
    const contents = rows.map((r) => r.content);
    expect(contents.sort()).toEqual(
      [
        'ada 1',
        'ada 2',
        'ada 3',
        'kim 1',
        'bob 1',
        'bob 2',
        ...Array.from({ length: 12 }, (_, i) => `bob ${i + 3}`),
      ].sort(),
    );
    expect(rows.filter((r) => r.provider_message_id === repeated)).toHaveLength(1);
    // Two messages of one webhook keep their order.
    const bobs = (await inboundRows(acc.accountId)).filter((r) => r.content?.startsWith('bob'));
    expect(bobs.findIndex((r) => r.content === 'bob 1')).toBeLessThan(
      bobs.findIndex((r) => r.content === 'bob 2'),
    );
    const received = await events(e, acc.accountId, 'message.received');
    expect(received.map((x) => (x.data as { id: string }).id).sort()).toEqual(
      rows.map((r) => r.id).sort(),
    );

    // One conversation per sender, open, its 24-hour window opened.
    const conversations = await e.t.db
      .selectFrom('conversations')
      .select(['id', 'contact_id', 'status', 'last_inbound_at'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(conversations).toHaveLength(3);
    for (const conv of conversations) {
      expect(conv.status).toBe('open');
      expect(conv.last_inbound_at).not.toBeNull();
    }
    expect(new Set(rows.map((r) => r.conversation_id)).size).toBe(3);

    // Every webhook processed; no job left behind.
    const stored = await webhooksOf(acc.accountId);
    expect(stored).toHaveLength(payloads.length);
    expect(stored.every((w) => w.processed_at !== null)).toBe(true);
    expect(await jobsOf(e, acc.accountId)).toEqual([]);
  });

  it('a known sender’s resolved conversation is reopened with its window, as one webhook would', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    const from = { phone: contact.phone, name: 'Sam' };
    await deliverAll(c, [text(c, from, { text: 'first' })]);
    await drain(e, c.acc.accountId);
    const [row] = await inboundRows(c.acc.accountId);
    const resolved = await c.acc.call({
      method: 'POST',
      url: `/v1/conversations/${row!.conversation_id}/resolve`,
    });
    expect(resolved.statusCode, resolved.body).toBe(200);
    const before = await e.t.db
      .selectFrom('conversations')
      .select(['last_inbound_at'])
      .where('id', '=', row!.conversation_id)
      .executeTakeFirstOrThrow();

    e.t.clock.advance(60_000);
    await deliverAll(c, [text(c, from, { text: 'again' }), text(c, from, { text: 'and again' })]);
    await drain(e, c.acc.accountId);
    const conversation = await e.t.db
      .selectFrom('conversations')
      .select(['status', 'last_inbound_at'])
      .where('id', '=', row!.conversation_id)
      .executeTakeFirstOrThrow();
    expect(conversation.status).toBe('open');
    expect(conversation.last_inbound_at!.getTime()).toBeGreaterThanOrEqual(
      before.last_inbound_at!.getTime() + 60_000,
    );
    expect(await inboundRows(c.acc.accountId)).toHaveLength(3);
  });

  it('a webhook whose recording fails in the database fails alone, and is retried on its job', async () => {
    const c = await connectedAccount(e);
    await sql`
      CREATE FUNCTION test_refuse_inbound() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.content = 'boom' THEN RAISE EXCEPTION 'refused by the test'; END IF;
        RETURN NEW;
      END $$`.execute(e.t.db);
    await sql`CREATE TRIGGER test_refuse_inbound BEFORE INSERT ON messages
      FOR EACH ROW EXECUTE FUNCTION test_refuse_inbound()`.execute(e.t.db);
    const senders = Array.from({ length: 10 }, (_, i) => ({
      phone: randomPhone(),
      name: `Sender ${i}`,
    }));
    try {
      await deliverAll(
        c,
        senders.map((s, i) => text(c, s, { text: i === 4 ? 'boom' : `fine ${i}` })),
      );
      await drain(e, c.acc.accountId);
      expect((await inboundRows(c.acc.accountId)).map((r) => r.content).sort()).toEqual(
        senders.flatMap((_, i) => (i === 4 ? [] : [`fine ${i}`])).sort(),
      );
      // Its job released for the next attempt, with the error.
      const jobs = await e.t.db
        .selectFrom('jobs')
        .select(['attempts', 'locked_until', 'run_at', 'last_error', 'dead_at'])
        .where('account_id', '=', c.acc.accountId)
        .execute();
      expect(jobs).toEqual([
        {
          attempts: 1,
          locked_until: null,
          run_at: expect.any(Date),
          last_error: expect.stringContaining('refused by the test'),
          dead_at: null,
        },
      ]);
      // Due again after the first of the retry delays (the test clock runs on meanwhile).
      const dueIn = jobs[0]!.run_at.getTime() - e.t.clock.now().getTime();
      expect(dueIn).toBeGreaterThan(0);
      expect(dueIn).toBeLessThanOrEqual(1_000);
      expect((await webhooksOf(c.acc.accountId)).filter((w) => !w.processed_at)).toHaveLength(1);
    } finally {
      await sql`DROP TRIGGER test_refuse_inbound ON messages`.execute(e.t.db);
      await sql`DROP FUNCTION test_refuse_inbound()`.execute(e.t.db);
    }
    e.t.clock.advance(1_000);
    await drain(e, c.acc.accountId);
    expect((await inboundRows(c.acc.accountId)).map((r) => r.content)).toContain('boom');
    expect((await webhooksOf(c.acc.accountId)).every((w) => w.processed_at !== null)).toBe(true);
    expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
  });

  it('a runner takes over a webhook whose processing outlives its lease; the message is recorded once', async () => {
    const c = await connectedAccount(e);
    const messages = e.t.services.messages;
    const real = messages.receiveMany.bind(messages);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The first recording hangs, as a process that stopped mid-way would.
    vi.spyOn(messages, 'receiveMany').mockImplementationOnce(async (scope, inbound) => {
      await held;
      return real(scope, inbound);
    });
    const from = { phone: randomPhone(), name: 'Lena' };
    try {
      await takeOver(c, from);
    } finally {
      release();
    }
    // The first process wakes up: the message is already there, and it changes nothing.
    await e.t.services.inbound.settled();
    expect(await inboundRows(c.acc.accountId)).toHaveLength(1);
    expect(await events(e, c.acc.accountId, 'message.received')).toHaveLength(1);
    expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
  });
});

/** The webhook is posted, its processing hangs, and a runner takes it over after the lease. */
async function takeOver(c: Connected, from: { phone: string; name: string }): Promise<void> {
  await deliverAll(c, [text(c, from, { text: 'are you there?' })]);

  // Leased to the process working on it: nothing for a runner to do before the lease ends.
  const [job] = await jobsOf(e, c.acc.accountId);
  expect(job).toMatchObject({ attempts: 1, dead_at: null });
  const leasedFor = job!.locked_until!.getTime() - e.t.clock.now().getTime();
  expect(leasedFor).toBeGreaterThan(55_000);
  expect(leasedFor).toBeLessThanOrEqual(60_000);
  const runner = () =>
    new JobRunner({
      db: e.t.db,
      clock: e.t.clock,
      log: e.t.app.log,
      handlers: e.t.services.jobHandlers,
      accountId: c.acc.accountId,
    }).drain();
  expect(await runner()).toBe(0);
  expect(await inboundRows(c.acc.accountId)).toEqual([]);

  e.t.clock.advance(60_001);
  expect(await runner()).toBe(1);
  expect((await inboundRows(c.acc.accountId)).map((r) => r.content)).toEqual(['are you there?']);
  expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
}
