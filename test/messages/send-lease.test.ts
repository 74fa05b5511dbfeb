import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage } from '../../src/channels/channel.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact, sendJobsOf } from '../inbox-helpers.js';
import { queueWebchatBatch, runnerOf } from './send-test-app.js';

// A batch of 300 messages goes 64 calls at a time: 5 rounds of 1 s calls, about 5 s in all,
// longer than its job's claim (3 s here, 60 s in the service, where calls may take 20 s each).
const LEASE_MS = 3_000;
const CALL_MS = 1_000;
const CONCURRENCY = 64;
const COUNT = 300;

/*
 * The batch renews its claim once half of it is gone, when one of its 64 calls ends and the next
 * begins. The first calls end one after the other across one call's time (then every call takes
 * CALL_MS), so that a call begins every CALL_MS / 64: the renewal starts as soon as half the claim
 * is gone and has nearly half a lease (1.5 s) to reach the database before another runner could
 * claim the job, however slow the machine.
 */
const calls: OutboundMessage[] = [];
const slow: ChannelProvider = {
  name: 'sandbox',
  templatesBypassWindow: true,
  reachesAnyContact: true,
  send: async (m) => {
    const n = calls.push(m) - 1;
    const delay = n < CONCURRENCY ? Math.round((CALL_MS * (n + 1)) / CONCURRENCY) : CALL_MS;
    await new Promise((r) => setTimeout(r, delay));
    return { status: 'accepted', providerMessageId: `p_${m.messageId}` };
  },
};

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ readCache: false, providers: { webchat: slow }, sendLeaseMs: LEASE_MS });
});
afterAll(() => t.close());

it('a batch slower than its claim renews it: no second runner picks the job up meanwhile', async () => {
  const acc = await newAccount(t);
  const contacts: { id: string }[] = [];
  while (contacts.length < COUNT)
    contacts.push(...(await Promise.all(Array.from({ length: 10 }, () => createContact(acc)))));
  const { job, messages } = await queueWebchatBatch(t, acc.accountId, contacts, slow);
  expect(job).not.toBeNull();
  let done = false;
  const started = Date.now();
  const dispatch = t.services.messages
    .dispatch(acc.accountId, 'webchat', job!, messages, slow)
    .finally(() => (done = true));
  // Another runner, with the service's claim length, looks for due jobs all along.
  const other = runnerOf(t, acc.accountId, LEASE_MS);
  let claimed = 0;
  while (!done) {
    claimed += await other.drain(1);
    await new Promise((r) => setTimeout(r, 25));
  }
  const rows = await dispatch;
  // The batch did outlast its first claim, which the other runner would have taken unrenewed.
  expect(Date.now() - started).toBeGreaterThan(LEASE_MS);
  expect(claimed).toBe(0);
  expect(calls).toHaveLength(COUNT);
  expect(new Set(calls.map((m) => m.messageId)).size).toBe(COUNT);
  expect([...rows.values()].every((r) => r.status === 'sent')).toBe(true);
  expect(rows.size).toBe(COUNT);
  expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
});
