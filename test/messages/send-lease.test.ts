import { afterAll, beforeAll, expect, it } from 'vitest';
import { newAccount, type TestApp } from '../helpers.js';
import { createContact, sendJobsOf } from '../inbox-helpers.js';
import { runnerOf, startSendTestApp } from './send-test-app.js';
import { slowProvider } from './slow-provider.js';

// A batch of 300 messages goes 64 calls at a time: 5 rounds of 400 ms calls, 2 s in all, longer
// than its job's claim (1.5 s here, 60 s in the service, where calls may take 20 s each).
const LEASE_MS = 1_500;
const COUNT = 300;
const { provider: slow, calls } = slowProvider(400);

let t: TestApp;
beforeAll(async () => {
  t = await startSendTestApp({ providers: { webchat: slow }, sendLeaseMs: LEASE_MS });
});
afterAll(() => t.close());

it('a batch slower than its claim renews it: no second runner picks the job up meanwhile', async () => {
  const acc = await newAccount(t);
  const contacts: { id: string }[] = [];
  for (let i = 0; i < COUNT; i++) contacts.push(await createContact(acc));
  const queued = await t.db.transaction().execute((trx) =>
    t.services.messages.queue(trx, acc.accountId, {
      channel: 'webchat',
      message: { type: 'text', content: 'hello', template: null, mediaUrl: null },
      broadcastId: null,
      recipients: contacts.map((c) => ({ contactId: c.id })),
      provider: 'sandbox',
    }),
  );
  expect(queued.job).not.toBeNull();
  const messages = queued.results.map((r) => ({
    row: r.row!,
    channel: 'webchat' as const,
    contactId: r.contactId,
    ...r.to!,
  }));
  let done = false;
  const dispatch = t.services.messages
    .dispatch(acc.accountId, 'webchat', queued.job!, messages, slow)
    .finally(() => (done = true));
  // Another runner, with the service's claim length, looks for due jobs all along.
  const other = runnerOf(t, acc.accountId, LEASE_MS);
  let claimed = 0;
  while (!done) {
    claimed += await other.drain(1);
    await new Promise((r) => setTimeout(r, 25));
  }
  const rows = await dispatch;
  expect(claimed).toBe(0);
  expect(calls).toHaveLength(COUNT);
  expect(new Set(calls.map((m) => m.messageId)).size).toBe(COUNT);
  expect([...rows.values()].every((r) => r.status === 'sent')).toBe(true);
  expect(rows.size).toBe(COUNT);
  expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
});
