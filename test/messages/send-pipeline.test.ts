import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage } from '../../src/channels/channel.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact } from '../inbox-helpers.js';

// A provider that answers every send after a short pause, so that many are in flight at once
// and their answers are recorded together; it refuses one recipient for good.
const REFUSED_PHONE_SUFFIX = '9999';
const calls: OutboundMessage[] = [];
// Named as the sandbox, which addresses every contact (a real provider needs an identity).
const slow: ChannelProvider = {
  name: 'sandbox',
  send: async (m) => {
    calls.push(m);
    await new Promise((r) => setTimeout(r, 20));
    return m.to.phone?.endsWith(REFUSED_PHONE_SUFFIX)
      ? { status: 'failed', reason: '(#131026) Message undeliverable' }
      : { status: 'accepted', providerMessageId: `p_${m.messageId}` };
  },
};

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
    const jobs = await t.db
      .selectFrom('jobs')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .where('kind', '=', 'message.send')
      .execute();
    expect(jobs).toEqual([]);
  }
  expect(calls).toHaveLength(30);
});
