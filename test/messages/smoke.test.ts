import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { newAccount, randomPhone, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    config: { sandboxAutoAdvance: true, sandboxDeliveredAfterMs: 0, sandboxReadAfterMs: 0 },
  });
});
afterAll(() => t.close());

it('inbound, reply, status, assign, resolve', async () => {
  const acc = await newAccount(t);
  const phone = randomPhone();
  const inbound = await acc.call({
    method: 'POST',
    url: '/v1/sandbox/inbound',
    payload: { channel: 'whatsapp', phone, type: 'text', content: 'hi' },
  });
  expect(inbound.statusCode, inbound.body).toBe(201);
  const contacts = (await acc.call({ method: 'GET', url: '/v1/contacts' })).json();
  const contactId = contacts.data[0].id;
  const sent = await acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { contact_id: contactId, channel: 'whatsapp', type: 'text', content: 'hello back' },
  });
  expect(sent.statusCode, sent.body).toBe(201);
  const runner = new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
    accountId: acc.accountId,
  });
  expect(await runner.drain()).toBe(2);
  const conv = await acc.call({
    method: 'GET',
    url: `/v1/conversations/${sent.json().conversation_id}`,
  });
  expect(conv.json().messages.map((m: { status: string }) => m.status)).toEqual([
    'delivered',
    'read',
  ]);
  const user = await acc.call({
    method: 'POST',
    url: '/v1/users',
    payload: { name: 'Agent', email: `a${Date.now()}@example.com` },
  });
  const assigned = await acc.call({
    method: 'POST',
    url: `/v1/conversations/${conv.json().id}/assign`,
    payload: { user_id: user.json().id },
  });
  expect(assigned.json().assigned_to).toEqual({ type: 'user', id: user.json().id, name: 'Agent' });
  const resolved = await acc.call({
    method: 'POST',
    url: `/v1/conversations/${conv.json().id}/resolve`,
  });
  expect(resolved.json().status).toBe('resolved');
  const events = await t.db
    .selectFrom('events')
    .select('type')
    .where('account_id', '=', acc.accountId)
    .orderBy('seq')
    .execute();
  expect(events.map((e) => e.type)).toEqual([
    'contact.created',
    'message.received',
    'message.created',
    'message.delivered',
    'message.read',
    'conversation.assigned',
    'conversation.resolved',
  ]);
});

it('a send refused by the 24-hour window leaves no empty conversation behind', async () => {
  const acc = await newAccount(t);
  const contact = (
    await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } })
  ).json();
  const refused = await acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { contact_id: contact.id, channel: 'whatsapp', type: 'text', content: 'hi' },
  });
  expect(refused.statusCode).toBe(422);
  const conversations = await t.db
    .selectFrom('conversations')
    .select('id')
    .where('account_id', '=', acc.accountId)
    .execute();
  expect(conversations).toHaveLength(0);
});
