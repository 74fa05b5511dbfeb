import { afterAll, beforeAll, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage } from '../../src/channels/channel.js';
import { testDatabaseUrl } from '../database.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact, sendJobsOf } from '../inbox-helpers.js';
import { TcpProxy } from '../tcp-proxy.js';
import { queueWebchatBatch, runnerOf } from './send-test-app.js';

// The database goes away (a restart, a failover) after the provider took a batch and before its
// answers are recorded. Given up, the answers are lost, and once the job's claim ends its next
// runner sends every message a second time; kept while the claim holds, they are recorded once
// the database is back, and nothing is sent again.
const LEASE_MS = 20_000;
const OUTAGE_MS = 1_500;
const COUNT = 20;

const target = new URL(testDatabaseUrl());
const proxy = new TcpProxy(Number(target.port || 5432), target.hostname);
let outage: Promise<void> | null = null;

const calls: OutboundMessage[] = [];
const cutting: ChannelProvider = {
  name: 'sandbox',
  templatesBypassWindow: true,
  reachesAnyContact: true,
  send: async (m) => {
    calls.push(m);
    // The last call cuts the database off as it answers, for OUTAGE_MS.
    if (calls.length === COUNT)
      outage = (async () => {
        await proxy.cut();
        await new Promise((r) => setTimeout(r, OUTAGE_MS));
        await proxy.restore();
      })();
    return { status: 'accepted', providerMessageId: `p_${m.messageId}` };
  },
};

let t: TestApp;
beforeAll(async () => {
  await proxy.start();
  const url = new URL(target);
  url.port = String(proxy.port);
  t = await startTestApp({
    databaseUrl: url.toString(),
    readCache: false,
    providers: { webchat: cutting },
    sendLeaseMs: LEASE_MS,
  });
});
afterAll(async () => {
  await t?.close();
  await proxy.cut();
});

it('answers the provider gave are recorded once the database is back, and the batch is never sent again', async () => {
  const acc = await newAccount(t);
  const contacts = await Promise.all(Array.from({ length: COUNT }, () => createContact(acc)));
  const { job, messages } = await queueWebchatBatch(t, acc.accountId, contacts, cutting);
  const rows = await t.services.messages.dispatch(
    acc.accountId,
    'webchat',
    job!,
    messages,
    cutting,
  );
  expect(outage).not.toBeNull();
  await outage;
  expect(rows.size).toBe(COUNT);
  expect([...rows.values()].every((r) => r.status === 'sent')).toBe(true);
  expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);

  // Past the claim, a runner finds nothing left to send.
  t.clock.advance(LEASE_MS + 1_000);
  expect(await runnerOf(t, acc.accountId, LEASE_MS).drain(10)).toBe(0);
  expect(calls).toHaveLength(COUNT);
  const stored = await t.db
    .selectFrom('messages')
    .select(['id', 'status', 'provider_message_id'])
    .where('account_id', '=', acc.accountId)
    .execute();
  expect(stored).toHaveLength(COUNT);
  for (const m of stored)
    expect(m).toMatchObject({ status: 'sent', provider_message_id: `p_${m.id}` });
});
