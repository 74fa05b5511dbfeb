import { afterAll, beforeAll, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact, sendJobsOf } from '../inbox-helpers.js';
import { trackTimers } from '../live-timers.js';
import { slowProvider } from './slow-provider.js';
import {
  SEND_RETRY_DELAYS_MS,
  SendPipeline,
  type QueuedSend,
} from '../../src/messages/send-pipeline.js';

// Many sends in flight at once, their answers recorded together; one recipient refused for good.
const REFUSED_PHONE_SUFFIX = '9999';
const { provider: slow, calls } = slowProvider(20, (m) =>
  m.to.phone?.endsWith(REFUSED_PHONE_SUFFIX) ? '(#131026) Message undeliverable' : null,
);

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ providers: { webchat: slow } });
});
afterAll(() => t.close());

it('concurrent sends of two accounts, recorded together, each end with their own answer, events and no job left', async () => {
  const accounts = [await newAccount(t), await newAccount(t)];
  const sends = [];
  for (const [a, acc] of accounts.entries()) {
    for (let i = 0; i < 15; i++) {
      const phone = `+1415555${a}${String(i).padStart(3, '0')}`;
      const contact = await createContact(
        acc,
        i === 7 ? `+141555${a}${REFUSED_PHONE_SUFFIX}` : phone,
      );
      sends.push({ acc, contact });
    }
  }
  const answers = await Promise.all(
    sends.map(({ acc, contact }) =>
      acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'hi' },
      }),
    ),
  );
  for (const [i, res] of answers.entries()) {
    expect(res.statusCode).toBe(201);
    const refused = sends[i]!.contact.phone.endsWith(REFUSED_PHONE_SUFFIX);
    expect(res.json()).toMatchObject(
      refused
        ? { status: 'failed', failure_reason: '(#131026) Message undeliverable' }
        : { status: 'sent', failure_reason: null },
    );
  }
  for (const acc of accounts) {
    const rows = await t.db
      .selectFrom('messages')
      .select(['id', 'status', 'provider_message_id'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(rows).toHaveLength(15);
    for (const r of rows)
      expect(r.provider_message_id).toBe(r.status === 'sent' ? `p_${r.id}` : null);
    const failedEvents = await t.db
      .selectFrom('events')
      .select('type')
      .where('account_id', '=', acc.accountId)
      .where('type', '=', 'message.failed')
      .execute();
    expect(failedEvents).toHaveLength(1);
    expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
  }
  expect(calls).toHaveLength(30);
});

it('a send answered in time leaves no timer behind it (the 10 s wait is cleared, not left to run)', async () => {
  const acc = await newAccount(t);
  const contact = await createContact(acc, '+14155557001');
  const send = () =>
    acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'hi' },
    });
  expect((await send()).statusCode).toBe(201); // caches warm, pool connection open
  const timers = trackTimers();
  try {
    for (let i = 0; i < 60; i++) expect((await send()).json()).toMatchObject({ status: 'sent' });
    // Idle pool connections' timers and the like may be pending; one per send may not.
    expect(timers.pending()).toBeLessThan(20);
  } finally {
    timers.stop();
  }
});

it('the send retry schedule is the documented one: 2 s, 10 s and 30 s first, never more than an hour apart, a day in all', () => {
  expect(SEND_RETRY_DELAYS_MS.slice(0, 3)).toEqual([2_000, 10_000, 30_000]);
  expect(Math.max(...SEND_RETRY_DELAYS_MS)).toBe(3_600_000);
  const total = SEND_RETRY_DELAYS_MS.reduce((a, b) => a + b, 0);
  expect(total).toBeGreaterThanOrEqual(24 * 3_600_000);
  expect(total).toBeLessThan(25 * 3_600_000);
});

it('a message the attempt never reached (its claim could not be kept) is tried again, so its job lives on', () => {
  const pipeline = new SendPipeline({} as ConstructorParameters<typeof SendPipeline>[0]);
  const message = (id: string) => ({ messageId: id }) as QueuedSend['messages'][number];
  const send: QueuedSend = {
    accountId: 'acc_x',
    channel: 'whatsapp',
    jobId: 'job_x',
    lease: new Date(),
    attempt: 1,
    messages: [message('msg_1'), message('msg_2'), message('msg_3')],
    observed: false,
  };
  const plan = pipeline.plan(
    send,
    new Map([['msg_1', { status: 'accepted', providerMessageId: 'wamid.1' }]]),
  );
  expect(plan.records).toEqual([{ id: 'msg_1', status: 'sent', providerMessageId: 'wamid.1' }]);
  expect(plan.retry).toEqual({
    afterMs: SEND_RETRY_DELAYS_MS[0],
    error: 'not tried: the send job could not keep its claim',
  });
});
