import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage, SendOutcome } from '../../src/channels/channel.js';
import { SEND_LEASE_MS } from '../../src/messages/send-pipeline.js';
import { HAND_OUT_AHEAD, IN_DOUBT_REASON } from '../../src/messages/send-recorder.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createBroadcast, createContact, getBroadcast } from '../broadcasts/broadcast-helpers.js';
import { sendJobsOf } from '../inbox-helpers.js';
import { queueWebchatBatch, runnerOf } from './send-test-app.js';

/*
 * A worker killed mid-batch, in one process: a provider (named as WhatsApp's, so its hand-outs are
 * tracked; it stands in for webchat's here, which needs no identity nor window) answers the first
 * ANSWERED calls and never answers the next ones, as if the worker had died while they were out.
 * Once the batch's claim has run out (the clock moved past it), a runner takes the job over.
 */
const COUNT = 300;
const ANSWERED = 100;
const CONCURRENCY = 64;

const calls: OutboundMessage[] = [];
let answering = ANSWERED;
/** The first calls the provider answers "not now" (throttled), by their number. */
let throttled = 0;
const dying: ChannelProvider = {
  name: 'whatsapp_cloud',
  templatesBypassWindow: true,
  reachesAnyContact: true,
  send: (m) => {
    const n = calls.push(m);
    if (n <= throttled) return Promise.resolve({ status: 'retry', reason: 'throttled' });
    if (answering-- > 0)
      return Promise.resolve({ status: 'accepted', providerMessageId: `p_${m.messageId}` });
    return new Promise<SendOutcome>(() => undefined);
  },
};

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    readCache: false,
    providers: { webchat: dying },
    config: { broadcastBatchSize: COUNT },
  });
});
afterAll(() => t.close());

async function contactsOf(acc: Awaited<ReturnType<typeof newAccount>>, tags?: string[]) {
  const contacts: { id: string }[] = [];
  while (contacts.length < COUNT)
    contacts.push(
      ...(await Promise.all(
        Array.from({ length: 10 }, () => createContact(acc, tags ? { tags } : {})),
      )),
    );
  return contacts;
}

async function statuses(ids: string[]) {
  const rows = await t.db
    .selectFrom('messages')
    .select(['id', 'status', 'failure_reason', 'provider_message_id'])
    .where('id', 'in', ids)
    .execute();
  return new Map(rows.map((r) => [r.id, r]));
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 10_000) {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function begin(throttle = 0) {
  calls.length = 0;
  answering = ANSWERED;
  throttled = throttle;
}

/** The job's mark: which of its messages its attempt may have handed out (see send-recorder). */
async function markOf(jobId: string) {
  const row = await t.db
    .selectFrom('jobs')
    .select(['handed_upto', 'not_taken'])
    .where('id', '=', jobId)
    .executeTakeFirstOrThrow();
  return row.handed_upto;
}

it('answers are recorded while the batch runs; a runner taking over fails what may have been handed out and sends the rest, each message at most once', async () => {
  begin();
  const acc = await newAccount(t);
  const contacts = await contactsOf(acc);
  const { job, messages } = await queueWebchatBatch(t, acc.accountId, contacts, dying);
  const ids = messages.map((m) => m.row.id);
  let settled = false;
  void t.services.messages
    .dispatch(acc.accountId, 'webchat', job!, messages, dying)
    .finally(() => (settled = true))
    .catch(() => undefined);
  // 100 answered, 64 out and never answered (the worker "died" with them in flight).
  await waitFor('the calls', async () => calls.length === ANSWERED + CONCURRENCY);
  const answered = calls.slice(0, ANSWERED).map((m) => m.messageId);
  const hung = calls.slice(ANSWERED).map((m) => m.messageId);
  // Recorded as they came (every 64 answers or 250 ms), while the batch is still running.
  await waitFor('the answers recorded', async () =>
    [...(await statuses(answered)).values()].every((r) => r.status === 'sent'),
  );
  expect(settled).toBe(false);
  const mark = await markOf(job!.id);
  expect(mark).not.toBeNull();
  // The mark covers every call begun, and at most HAND_OUT_AHEAD beyond the last one.
  const sorted = [...ids].sort();
  for (const id of [...answered, ...hung]) expect(id <= mark!).toBe(true);
  const covered = sorted.filter((id) => id <= mark!);
  expect(covered.length).toBeLessThanOrEqual(ANSWERED + CONCURRENCY + HAND_OUT_AHEAD);

  // The claim runs out; a runner takes the job over.
  answering = Infinity;
  t.clock.advance(SEND_LEASE_MS + 1_000);
  await runnerOf(t, acc.accountId).drain();

  const after = await statuses(ids);
  const called = calls.map((m) => m.messageId);
  expect(new Set(called).size).toBe(called.length);
  for (const id of answered) expect(after.get(id)!.status).toBe('sent');
  const inDoubt = covered.filter((id) => !answered.includes(id));
  for (const id of inDoubt) {
    expect(after.get(id)!.status).toBe('failed');
    expect(after.get(id)!.failure_reason).toBe(IN_DOUBT_REASON);
  }
  for (const id of hung) expect(inDoubt).toContain(id);
  // Never handed out: sent by the runner, once.
  const rest = sorted.filter((id) => id > mark!);
  expect(rest.length).toBeGreaterThan(0);
  for (const id of rest) {
    expect(after.get(id)!.status).toBe('sent');
    expect(called.filter((c) => c === id)).toHaveLength(1);
  }
  expect(called).toHaveLength(ANSWERED + CONCURRENCY + rest.length);
  const failedEvents = await t.db
    .selectFrom('events')
    .select(['data'])
    .where('account_id', '=', acc.accountId)
    .where('type', '=', 'message.failed')
    .execute();
  expect(failedEvents.map((e) => (e.data as { id: string }).id).sort()).toEqual(inDoubt.sort());
  expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
}, 60_000);

it('a broadcast batch whose worker died: in-doubt recipients failed, the rest sent, the counts exact', async () => {
  begin();
  const acc = await newAccount(t);
  await contactsOf(acc, ['doubt']);
  const b = await createBroadcast(acc, { audience: { tags: ['doubt'] } });
  const step = await t.services.broadcasts.queueNextBatch(acc.accountId, b.id, true);
  if (typeof step === 'string' || !('dispatch' in step)) throw new Error('no batch queued');
  void step.dispatch().catch(() => undefined);
  await waitFor('the calls', async () => calls.length === ANSWERED + CONCURRENCY);
  const answered = calls.slice(0, ANSWERED).map((m) => m.messageId);
  await waitFor('the answers recorded', async () =>
    [...(await statuses(answered)).values()].every((r) => r.status === 'sent'),
  );
  // The recipients' counts follow the answers as they are recorded.
  expect((await getBroadcast(acc, b.id)).stats.sent).toBe(ANSWERED);

  answering = Infinity;
  t.clock.advance(SEND_LEASE_MS + 1_000);
  const runner = runnerOf(t, acc.accountId);
  for (let i = 0; i < 20; i++) {
    await runner.drain();
    if ((await getBroadcast(acc, b.id)).status !== 'sending') break;
    t.clock.advance(5_000);
  }
  const done = await getBroadcast(acc, b.id);
  const rows = await t.db
    .selectFrom('messages')
    .select(['id', 'status', 'failure_reason'])
    .where('account_id', '=', acc.accountId)
    .where('broadcast_id', '=', b.id)
    .execute();
  const called = calls.map((m) => m.messageId);
  expect(new Set(called).size).toBe(called.length);
  const sent = rows.filter((r) => r.status === 'sent');
  const failed = rows.filter((r) => r.status === 'failed');
  expect(rows).toHaveLength(COUNT);
  expect(sent.length + failed.length).toBe(COUNT);
  expect(failed.length).toBeGreaterThanOrEqual(CONCURRENCY);
  expect(failed.every((r) => r.failure_reason === IN_DOUBT_REASON)).toBe(true);
  for (const r of sent) expect(called).toContain(r.id);
  expect(done.status).toBe('sent');
  expect(done.stats.sent).toBe(sent.length);
  expect(done.stats.failed).toBe(failed.length);
  // The recipients list shows the in-doubt ones failed, with the reason.
  const res = await acc.call({
    method: 'GET',
    url: `/v1/broadcasts/${b.id}/recipients?status=failed&limit=100`,
  });
  const listed = res.json<{
    data: { status: string; failure_reason: string | null }[];
    total: number;
  }>();
  expect(listed.total).toBe(failed.length);
  expect(listed.data.length).toBe(Math.min(100, failed.length));
  for (const r of listed.data)
    expect(r).toMatchObject({ status: 'failed', failure_reason: IN_DOUBT_REASON });
}, 60_000);

it('messages the provider answered "not now" before the worker died are not in doubt: sent again by the runner', async () => {
  const THROTTLED = 20;
  begin(THROTTLED);
  const acc = await newAccount(t);
  const contacts = await contactsOf(acc);
  const { job, messages } = await queueWebchatBatch(t, acc.accountId, contacts, dying);
  void t.services.messages
    .dispatch(acc.accountId, 'webchat', job!, messages, dying)
    .catch(() => undefined);
  await waitFor('the calls', async () => calls.length === THROTTLED + ANSWERED + CONCURRENCY);
  const notTaken = calls.slice(0, THROTTLED).map((m) => m.messageId);
  const answered = calls.slice(THROTTLED, THROTTLED + ANSWERED).map((m) => m.messageId);
  await waitFor('the answers recorded', async () => {
    const row = await t.db
      .selectFrom('jobs')
      .select(['not_taken'])
      .where('id', '=', job!.id)
      .executeTakeFirstOrThrow();
    const sent = [...(await statuses(answered)).values()].every((r) => r.status === 'sent');
    return sent && (row.not_taken ?? []).length === THROTTLED;
  });

  answering = Infinity;
  throttled = 0;
  t.clock.advance(SEND_LEASE_MS + 1_000);
  await runnerOf(t, acc.accountId).drain();
  const after = await statuses(messages.map((m) => m.row.id));
  const called = calls.map((m) => m.messageId);
  for (const id of notTaken) {
    expect(after.get(id)!.status).toBe('sent');
    expect(called.filter((c) => c === id)).toHaveLength(2);
  }
  const others = called.filter((c) => !notTaken.includes(c));
  expect(new Set(others).size).toBe(others.length);
  for (const id of calls.slice(THROTTLED + ANSWERED, THROTTLED + ANSWERED + CONCURRENCY))
    expect(after.get(id.messageId)!.failure_reason).toBe(IN_DOUBT_REASON);
  expect([...after.values()].filter((r) => r.status === 'queued')).toEqual([]);
}, 60_000);
