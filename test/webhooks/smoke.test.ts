import { createHmac } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { WebhookDispatcher } from '../../src/webhooks/webhook-dispatcher.js';
import { newAccount, randomPhone, startTestApp, type TestApp } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { testWebhookSecrets } from '../secrets-key.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

it('delivers a signed contact.created', async () => {
  const receiver = await startHttpsServer(() => ({ status: 204 }));
  try {
    const acc = await newAccount(t);
    const wh = await acc.call({
      method: 'POST',
      url: '/v1/webhooks',
      payload: { url: receiver.url('/hook'), events: ['contact.created'] },
    });
    expect(wh.statusCode, wh.body).toBe(201);
    const { secret } = wh.json();
    const contact = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone() },
    });
    const dispatcher = new WebhookDispatcher({
      db: t.db,
      secrets: testWebhookSecrets(),
      clock: t.clock,
      log: t.app.log,
      allowPrivate: true,
      accountId: acc.accountId,
    });
    expect(await dispatcher.drain()).toBe(1);
    await dispatcher.stop();
    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    expect(req.headers['x-service-signature']).toBe(
      createHmac('sha256', secret).update(req.body).digest('hex'),
    );
    const verified = new StandardWebhook(secret).verify(
      req.body.toString(),
      req.headers as Record<string, string>,
    );
    // Created with an API key: the data carries `actor: null` after the contact.
    const data = { ...contact.json(), actor: null };
    expect(verified).toMatchObject({ event: 'contact.created', data });
    expect(req.body.toString()).toContain(JSON.stringify(data));
    const log = await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.json().id}/deliveries` });
    expect(log.json().data[0]).toMatchObject({
      event: 'contact.created',
      attempt: 1,
      status_code: 204,
      error: null,
    });
  } finally {
    await receiver.close();
  }
});
