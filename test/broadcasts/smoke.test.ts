import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { newAccount, randomPhone, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { broadcastBatchSize: 3 } });
});
afterAll(() => t.close());

it('sends a broadcast to a tag audience and completes', async () => {
  const acc = await newAccount(t);
  for (let i = 0; i < 7; i++) {
    await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), tags: i < 5 ? ['vip'] : ['other'] },
    });
  }
  const created = await acc.call({
    method: 'POST',
    url: '/v1/broadcasts',
    payload: {
      name: 'Promo',
      channel: 'webchat',
      audience: { tags: ['vip'] },
      message: { type: 'text', content: 'Hi!' },
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  expect(created.json()).toMatchObject({
    status: 'sending',
    stats: { sent: 0, delivered: 0, read: 0, replied: 0, failed: 0 },
  });
  const runner = new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
    accountId: acc.accountId,
  });
  await runner.drain();
  const done = await acc.call({ method: 'GET', url: `/v1/broadcasts/${created.json().id}` });
  expect(done.json()).toMatchObject({ status: 'sent', stats: { sent: 5, failed: 0 } });
  const events = await t.db
    .selectFrom('events')
    .select(['type', 'data'])
    .where('account_id', '=', acc.accountId)
    .where('type', '=', 'broadcast.completed')
    .execute();
  expect(events).toHaveLength(1);
  const recipients = await t.db
    .selectFrom('broadcast_recipients')
    .selectAll()
    .where('account_id', '=', acc.accountId)
    .execute();
  expect(recipients).toHaveLength(5);
  // A reply counts once.
  const contactId = recipients[0]!.contact_id;
  await acc.call({
    method: 'POST',
    url: '/v1/sandbox/inbound',
    payload: { channel: 'webchat', contact_id: contactId, type: 'text', content: 'thanks' },
  });
  await acc.call({
    method: 'POST',
    url: '/v1/sandbox/inbound',
    payload: { channel: 'webchat', contact_id: contactId, type: 'text', content: 'again' },
  });
  await acc.call({
    method: 'POST',
    url: `/v1/sandbox/messages/${recipients[0]!.message_id}/status`,
    payload: { status: 'read' },
  });
  const after = await acc.call({ method: 'GET', url: `/v1/broadcasts/${created.json().id}` });
  expect(after.json().stats).toEqual({ sent: 5, delivered: 1, read: 1, replied: 1, failed: 0 });
});
