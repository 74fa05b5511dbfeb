import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FakeGraph, META_ERRORS } from '../fake-graph/server.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact, expectStatus } from '../inbox-helpers.js';

const PHONE = {
  id: '106540352242922',
  token: `EAA${randomBytes(16).toString('hex')}`,
  display_phone_number: '+1 555-010-0199',
  verified_name: 'Acme',
  business_account_id: '102290129340398',
};

let graph: FakeGraph;
let t: TestApp;
beforeAll(async () => {
  graph = await new FakeGraph().start();
  graph.addPhoneNumber(PHONE);
  t = await startTestApp({
    config: { metaGraphUrl: graph.url, secretsKey: randomBytes(32) },
  });
});
afterAll(async () => {
  await t?.close();
  await graph?.stop();
});

it('a send Graph refuses for the token itself marks the connection error until it is connected again', async () => {
  const acc = await newAccount(t);
  // Approved while still on the sandbox: once connected, the account's templates are Meta's.
  const tpl = await acc.call({
    method: 'POST',
    url: '/v1/templates',
    payload: { name: 'welcome', body: 'Welcome!' },
  });
  expectStatus(
    await acc.call({
      method: 'POST',
      url: `/v1/sandbox/templates/${tpl.json().id}/review`,
      payload: { status: 'approved' },
    }),
    200,
  );
  const body = {
    provider: 'whatsapp_cloud',
    phone_number_id: PHONE.id,
    business_account_id: PHONE.business_account_id,
    access_token: PHONE.token,
    app_secret: 'app-secret',
  };
  expectStatus(await acc.call({ method: 'PUT', url: '/v1/channels/whatsapp', payload: body }), 200);
  const contact = await createContact(acc, '+14155550123');

  graph.failNext(`${PHONE.id}/messages`, 1, META_ERRORS.expiredToken);
  const res = await acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: 'welcome',
    },
  });
  expectStatus(res, 201);
  expect(res.json()).toMatchObject({
    status: 'failed',
    failure_reason: expect.stringMatching(/^\(#190\)/),
  });

  const deadline = Date.now() + 5_000;
  let channel = (await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' })).json();
  while (channel.status !== 'error' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    channel = (await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' })).json();
  }
  expect(channel).toMatchObject({ status: 'error', error: expect.stringMatching(/^\(#190\)/) });
  expect(JSON.stringify(channel)).not.toContain(PHONE.token);

  // Connected again (a new token, checked with Graph): active, and sending works.
  const again = await acc.call({ method: 'PUT', url: '/v1/channels/whatsapp', payload: body });
  expect(again.json()).toMatchObject({ status: 'active', error: null, id: channel.id });
  const ok = await acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: 'welcome',
    },
  });
  expect(ok.json()).toMatchObject({ status: 'sent' });
});
