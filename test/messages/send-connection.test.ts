import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FakeGraph, META_ERRORS } from '../fake-graph/server.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { createContact, eventsOf, expectStatus, freezeClock, receive } from '../inbox-helpers.js';
import { SEND_WAIT_MS } from '../../src/messages/messages.service.js';
import { runnerOf } from './send-test-app.js';

// Integration: a WhatsApp connection on the fake Graph API, the sandbox enabled (the default),
// and sends Graph throttles, so that their job tries again after the channel changed.
const WA = {
  phone_number_id: '106540352200001',
  business_account_id: '102290129300001',
  access_token: `EAAWA${randomBytes(16).toString('hex')}`,
  app_secret: randomBytes(16).toString('hex'),
};
const SEND = { method: 'POST', resource: `${WA.phone_number_id}/messages` };
/** How long an API send waits for Graph here (10 s in the service). */
const WAIT_MS = 400;

let graph: FakeGraph;
let t: TestApp;

function addPhone(token: string) {
  graph.addPhoneNumber({
    id: WA.phone_number_id,
    token,
    display_phone_number: '+1 555-010-0001',
    verified_name: 'Shop',
    business_account_id: WA.business_account_id,
  });
}

beforeAll(async () => {
  graph = await new FakeGraph().start();
  addPhone(WA.access_token);
  t = await startTestApp({
    readCache: false,
    config: { metaGraphUrl: graph.url, secretsKey: randomBytes(32), sandboxEnabled: true },
    sendWaitMs: WAIT_MS,
  });
  // Jobs fall due only when a test moves the clock.
  freezeClock(t.clock, 3_600_000);
});
afterEach(() => graph.reset());
afterAll(async () => {
  await t.close();
  await graph.stop();
});

const connect = (acc: TestAccount, token = WA.access_token) =>
  acc.call({
    method: 'PUT',
    url: '/v1/channels/whatsapp',
    payload: { provider: 'whatsapp_cloud', ...WA, access_token: token },
  });

/** A contact who wrote (through the sandbox, before the channel is connected) on WhatsApp. */
async function connectedWithContact(): Promise<{ acc: TestAccount; contactId: string }> {
  const acc = await newAccount(t);
  const contact = await createContact(acc, randomPhone());
  await receive(acc, contact.id, 'whatsapp');
  expectStatus(await connect(acc), 200);
  return { acc, contactId: contact.id };
}

/** A text Graph throttles: answered `queued`, its job due again in about 2 s. */
async function throttledSend(acc: TestAccount, contactId: string): Promise<string> {
  graph.failNext(SEND, 1, META_ERRORS.tooManyCalls);
  const res = await acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { contact_id: contactId, channel: 'whatsapp', type: 'text', content: 'on its way' },
  });
  expectStatus(res, 201);
  expect(res.json()).toMatchObject({ status: 'queued' });
  return res.json<{ id: string }>().id;
}

async function messageRow(accountId: string, id: string) {
  return t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

/** Runs the account's due jobs after the retry's delay. */
async function runJobs(acc: TestAccount): Promise<void> {
  t.clock.advance(5_000);
  await runnerOf(t, acc.accountId).drain();
}

describe('a message queued for a connection goes to that connection only', () => {
  it('disconnected before the retry (the sandbox on): failed for good, never sent by the sandbox', async () => {
    const { acc, contactId } = await connectedWithContact();
    const id = await throttledSend(acc, contactId);
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' }), 200);
    await runJobs(acc);
    const row = await messageRow(acc.accountId, id);
    expect(row).toMatchObject({
      status: 'failed',
      provider_message_id: null,
      failure_reason: 'the whatsapp channel was disconnected before the message could be sent',
    });
    expect(graph.find(SEND)).toHaveLength(1);
    const failed = await eventsOf(t.db, acc.accountId, 'message.failed');
    expect(failed.map((e) => (e.data as { id: string }).id)).toEqual([id]);
    // Nothing left to try.
    await runJobs(acc);
    expect((await messageRow(acc.accountId, id)).status).toBe('failed');
  });

  it('connected anew (another connection) before the retry: failed for good', async () => {
    const { acc, contactId } = await connectedWithContact();
    const id = await throttledSend(acc, contactId);
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' }), 200);
    expectStatus(await connect(acc), 200);
    await runJobs(acc);
    expect(await messageRow(acc.accountId, id)).toMatchObject({
      status: 'failed',
      failure_reason: expect.stringContaining('before the message could be sent') as string,
    });
    expect(graph.find(SEND)).toHaveLength(1);
  });

  it('credentials replaced in place (same connection): the retry sends with the new ones', async () => {
    const { acc, contactId } = await connectedWithContact();
    const id = await throttledSend(acc, contactId);
    const rotated = `EAAWA${randomBytes(16).toString('hex')}`;
    addPhone(rotated);
    try {
      expectStatus(await connect(acc, rotated), 200);
      await runJobs(acc);
    } finally {
      addPhone(WA.access_token);
    }
    const row = await messageRow(acc.accountId, id);
    expect(row.status).toBe('sent');
    expect(row.provider_message_id).toMatch(/^wamid\./);
    const sends = graph.find(SEND);
    expect(sends).toHaveLength(2);
    expect(sends[1]!.token).toBe(rotated);
  });

  it('a failure to choose the provider other than its 422 (a pool timeout) is retried, not final', async () => {
    const { acc, contactId } = await connectedWithContact();
    const id = await throttledSend(acc, contactId);
    const resolver = t.services.resolver;
    const real = resolver.resolveWithConnection.bind(resolver);
    resolver.resolveWithConnection = () =>
      Promise.reject(new Error('timeout exceeded when trying to connect'));
    try {
      await runJobs(acc);
    } finally {
      resolver.resolveWithConnection = real;
    }
    expect((await messageRow(acc.accountId, id)).status).toBe('queued');
    const job = await t.db
      .selectFrom('jobs')
      .select(['last_error', 'locked_until'])
      .where('account_id', '=', acc.accountId)
      .where('kind', '=', 'message.send')
      .executeTakeFirstOrThrow();
    expect(job).toMatchObject({
      locked_until: null,
      last_error: 'choosing the provider failed: timeout exceeded when trying to connect',
    });
    expect(graph.find(SEND)).toHaveLength(1);
    // The database is back: the next attempt sends it.
    t.clock.advance(60_000);
    await runJobs(acc);
    expect((await messageRow(acc.accountId, id)).status).toBe('sent');
  });
});

describe('the wait of an API send (SEND_WAIT_MS, injected short here)', () => {
  it('a Graph call slower than the wait answers queued once the wait is over; the message is sent when Graph answers', async () => {
    const { acc, contactId } = await connectedWithContact();
    graph.delay(WAIT_MS + 1_000);
    const started = Date.now();
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contactId, channel: 'whatsapp', type: 'text', content: 'slow' },
    });
    const waited = Date.now() - started;
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ status: 'queued' });
    // The wait was kept; a longer one would have seen Graph's answer (`sent`) instead.
    expect(waited).toBeGreaterThanOrEqual(WAIT_MS - 20);
    const id = res.json<{ id: string }>().id;
    const until = Date.now() + 5_000;
    while ((await messageRow(acc.accountId, id)).status === 'queued' && Date.now() < until)
      await new Promise((r) => setTimeout(r, 50));
    expect(await messageRow(acc.accountId, id)).toMatchObject({
      status: 'sent',
      provider_message_id: expect.stringMatching(/^wamid\./) as string,
    });
    expect(graph.find(SEND)).toHaveLength(1);
  });

  it("is DESIGN's 10 s in the service", () => {
    expect(SEND_WAIT_MS).toBe(10_000);
  });
});
