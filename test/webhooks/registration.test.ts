import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, randomPhone, type TestAccount } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { expectError, expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';

let t: WebhookTestApp;
beforeAll(async () => {
  t = await startWebhookTestApp();
});
afterAll(() => t.close());

// Nothing listens there: a delivery drained in this file (see the isolation test) fails at once.
const HOOK_URL = 'https://127.0.0.1:9/switchboard';

async function register(acc: TestAccount, payload: Record<string, unknown>) {
  return acc.call({ method: 'POST', url: '/v1/webhooks', payload });
}

async function createWebhook(
  acc: TestAccount,
  events: string[] = ['contact.created'],
  url = HOOK_URL,
) {
  const res = await register(acc, { url, events });
  expectStatus(res, 201);
  return res.json<{
    id: string;
    url: string;
    events: string[];
    status: string;
    secret: string;
    created_at: string;
  }>();
}

describe('registration', () => {
  it('POST /v1/webhooks answers 201 with a whsec_ secret of 32 random bytes and status active', async () => {
    const acc = await newAccount(t);
    const res = await register(acc, {
      url: HOOK_URL,
      events: ['contact.created', 'message.received'],
    });
    expectStatus(res, 201);
    const body = res.json();
    expect(body).toEqual({
      id: expect.stringMatching(/^wh_/),
      url: HOOK_URL,
      events: ['contact.created', 'message.received'],
      status: 'active',
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      created_at: expect.any(String),
    });
    expect(Buffer.from(body.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(new Date(body.created_at).toISOString()).toBe(body.created_at);
    // A secret is random: a second registration gets another one.
    const again = await createWebhook(acc);
    expect(again.secret).not.toBe(body.secret);
  });

  it.each([
    ['an http:// URL', { url: 'http://hooks.example.com/x', events: ['contact.created'] }, 'url'],
    ['a URL that is not a URL', { url: 'not a url', events: ['contact.created'] }, 'url'],
    [
      'a URL with credentials',
      { url: 'https://user:pass@hooks.example.com/x', events: ['contact.created'] },
      'url',
    ],
    ['an ftp:// URL', { url: 'ftp://hooks.example.com/x', events: ['contact.created'] }, 'url'],
    ['an empty event list', { url: HOOK_URL, events: [] }, 'events'],
    [
      'an unknown event type',
      { url: HOOK_URL, events: ['contact.created', 'contact.exploded'] },
      'events',
    ],
    [
      'a duplicate event type',
      { url: HOOK_URL, events: ['contact.created', 'contact.created'] },
      'events',
    ],
    ['a missing url', { events: ['contact.created'] }, undefined],
    ['missing events', { url: HOOK_URL }, undefined],
  ])('registering %s is a 422 validation_error', async (_name, payload, field) => {
    const acc = await newAccount(t);
    const res = await register(acc, payload);
    expectError(res, 422);
    if (field) expect(JSON.stringify(res.json().error)).toContain(field);
    // Nothing was created.
    expect((await acc.call({ method: 'GET', url: '/v1/webhooks' })).json().total).toBe(0);
  });

  it('an account can have 20 webhooks; the 21st is a 422', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 20; i++) await createWebhook(acc, ['contact.created'], `${HOOK_URL}/${i}`);
    const res = await register(acc, { url: `${HOOK_URL}/20`, events: ['contact.created'] });
    expectError(res, 422);
    const list = await acc.call({ method: 'GET', url: '/v1/webhooks' });
    expect(list.json().total).toBe(20);
    // The cap is per account: another account is not affected.
    await createWebhook(await newAccount(t));
  });

  it('20 concurrent registrations on top of 19 still stop at 20', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 19; i++) await createWebhook(acc, ['contact.created'], `${HOOK_URL}/${i}`);
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        register(acc, { url: `${HOOK_URL}/c${i}`, events: ['contact.created'] }),
      ),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 422, 422, 422, 422]);
    expect((await acc.call({ method: 'GET', url: '/v1/webhooks' })).json().total).toBe(20);
  });
});

describe('reading and changing', () => {
  it('GET /v1/webhooks answers {data,total,page} with every webhook and never a secret', async () => {
    const acc = await newAccount(t);
    const a = await createWebhook(acc, ['contact.created']);
    const b = await createWebhook(acc, ['message.read', 'conversation.resolved'], `${HOOK_URL}/b`);
    const res = await acc.call({ method: 'GET', url: '/v1/webhooks' });
    expectStatus(res, 200);
    const body = res.json();
    expect(body.total).toBe(2);
    expect(body.page).toBe(1);
    expect(body.data).toHaveLength(2);
    for (const { id, url, events, status, created_at } of [a, b])
      expect(body.data).toContainEqual({ id, url, events, status, created_at });
    for (const item of body.data)
      expect(Object.keys(item).sort()).toEqual(['created_at', 'events', 'id', 'status', 'url']);
    expect(res.body).not.toContain('secret');
    expect(res.body).not.toContain(a.secret);
    expect(res.body).not.toContain(b.secret);
    expect(res.body).not.toContain('whsec_');
  });

  it('GET /v1/webhooks/{id} answers the webhook without its secret', async () => {
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, ['contact.created', 'message.delivered']);
    const res = await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` });
    expectStatus(res, 200);
    const { secret, ...shown } = wh;
    expect(res.json()).toEqual(shown);
    expect(res.body).not.toContain(secret);
    expect(res.body).not.toContain('secret');
    expectError(await acc.call({ method: 'GET', url: '/v1/webhooks/wh_doesnotexist' }), 404);
  });

  it('PATCH events changes the subscription, and new events follow it', async () => {
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, ['message.read']);
    const res = await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${wh.id}`,
      payload: { events: ['contact.created', 'conversation.assigned'] },
    });
    expectStatus(res, 200);
    expect(res.json()).toMatchObject({
      id: wh.id,
      events: ['contact.created', 'conversation.assigned'],
      status: 'active',
    });
    expect(res.body).not.toContain(wh.secret);
    expect((await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` })).json().events).toEqual(
      ['contact.created', 'conversation.assigned'],
    );
    // Bad event lists are refused as on registration.
    expectError(
      await acc.call({ method: 'PATCH', url: `/v1/webhooks/${wh.id}`, payload: { events: [] } }),
      422,
    );
    expectError(
      await acc.call({
        method: 'PATCH',
        url: `/v1/webhooks/${wh.id}`,
        payload: { events: ['nope'] },
      }),
      422,
    );
    // A contact.created is now queued for it.
    expectStatus(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } }),
      201,
    );
    const queued = await t.db
      .selectFrom('webhook_deliveries')
      .select('event_type')
      .where('account_id', '=', acc.accountId)
      .where('webhook_id', '=', wh.id)
      .execute();
    expect(queued.map((q) => q.event_type)).toEqual(['contact.created']);
  });

  it('PATCH status disabled stops queueing; PATCH status active re-enables', async () => {
    const acc = await newAccount(t);
    const wh = await createWebhook(acc, ['contact.created']);
    const off = await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${wh.id}`,
      payload: { status: 'disabled' },
    });
    expectStatus(off, 200);
    expect(off.json().status).toBe('disabled');
    expect((await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` })).json().status).toBe(
      'disabled',
    );
    expectStatus(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } }),
      201,
    );
    const on = await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${wh.id}`,
      payload: { status: 'active' },
    });
    expectStatus(on, 200);
    expect(on.json().status).toBe('active');
    expect((await acc.call({ method: 'GET', url: '/v1/webhooks' })).json().data[0].status).toBe(
      'active',
    );
    expectStatus(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } }),
      201,
    );
    const queued = await t.db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .where('webhook_id', '=', wh.id)
      .execute();
    expect(queued).toHaveLength(1);
    expectError(
      await acc.call({
        method: 'PATCH',
        url: `/v1/webhooks/${wh.id}`,
        payload: { status: 'paused' },
      }),
      422,
    );
  });

  it('DELETE answers {success:true}, and the webhook is then 404 and gone from the list', async () => {
    const acc = await newAccount(t);
    const wh = await createWebhook(acc);
    const keep = await createWebhook(acc, ['message.read'], `${HOOK_URL}/keep`);
    const res = await acc.call({ method: 'DELETE', url: `/v1/webhooks/${wh.id}` });
    expectStatus(res, 200);
    expect(res.json()).toEqual({ success: true });
    expectError(await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` }), 404);
    expectError(await acc.call({ method: 'DELETE', url: `/v1/webhooks/${wh.id}` }), 404);
    expectError(
      await acc.call({
        method: 'PATCH',
        url: `/v1/webhooks/${wh.id}`,
        payload: { status: 'active' },
      }),
      404,
    );
    expectError(await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` }), 404);
    const list = (await acc.call({ method: 'GET', url: '/v1/webhooks' })).json();
    expect(list.total).toBe(1);
    expect(list.data.map((w: { id: string }) => w.id)).toEqual([keep.id]);
  });

  it("another account's webhook is a 404 on GET, PATCH, DELETE, deliveries and retry, and absent from its list", async () => {
    const receiver = await startHttpsServer(() => ({ status: 200 }));
    try {
      const owner = await newAccount(t);
      const other = await newAccount(t);
      const wh = await createWebhook(owner, ['contact.created'], receiver.url('/owner'));
      const own = await createWebhook(other, ['contact.created'], `${HOOK_URL}/other`);
      expectStatus(
        await owner.call({
          method: 'POST',
          url: '/v1/contacts',
          payload: { phone: randomPhone() },
        }),
        201,
      );
      const dispatcher = t.dispatcher();
      // Earlier tests of this file queued deliveries to HOOK_URL too: they fail, and are not counted here.
      await dispatcher.drain();
      await dispatcher.stop();
      expect(receiver.requests).toHaveLength(1);
      const attempts = (
        await owner.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` })
      ).json();
      expect(attempts.total).toBe(1);
      const deliveryId: string = attempts.data[0].id;

      expectError(await other.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` }), 404);
      expectError(
        await other.call({
          method: 'PATCH',
          url: `/v1/webhooks/${wh.id}`,
          payload: { events: ['message.read'] },
        }),
        404,
      );
      expectError(
        await other.call({
          method: 'PATCH',
          url: `/v1/webhooks/${wh.id}`,
          payload: { status: 'disabled' },
        }),
        404,
      );
      expectError(
        await other.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` }),
        404,
      );
      expectError(
        await other.call({
          method: 'POST',
          url: `/v1/webhooks/${wh.id}/deliveries/${deliveryId}/retry`,
        }),
        404,
      );
      // Its own webhook id with the owner's delivery id is no way in either.
      expectError(
        await other.call({
          method: 'POST',
          url: `/v1/webhooks/${own.id}/deliveries/${deliveryId}/retry`,
        }),
        404,
      );
      expectError(await other.call({ method: 'DELETE', url: `/v1/webhooks/${wh.id}` }), 404);
      const list = (await other.call({ method: 'GET', url: '/v1/webhooks' })).json();
      expect(list.data.map((w: { id: string }) => w.id)).toEqual([own.id]);
      expect(list.total).toBe(1);

      // Untouched for its owner.
      const mine = await owner.call({ method: 'GET', url: `/v1/webhooks/${wh.id}` });
      expectStatus(mine, 200);
      expect(mine.json()).toMatchObject({ events: ['contact.created'], status: 'active' });
      expect(
        (await owner.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` })).json().total,
      ).toBe(1);
      expect(receiver.requests).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });
});
