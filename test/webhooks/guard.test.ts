import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedFetch, OutboundError, type GuardedRequest } from '../../src/net/guarded-fetch.js';
import { newAccount } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { createContact, expectError, expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';

describe('delivery to a private address', () => {
  let t: WebhookTestApp;
  beforeAll(async () => {
    // Registration allows the test receiver; the dispatcher below does not.
    t = await startWebhookTestApp();
  });
  afterAll(() => t.close());

  it('a dispatcher without allowPrivate refuses https://localhost: the attempt is logged as a private address and the receiver gets nothing', async () => {
    const rcv = await startHttpsServer(() => ({ status: 200 }));
    try {
      const acc = await newAccount(t);
      const created = await acc.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: rcv.url('/hook'), events: ['contact.created'] },
      });
      expectStatus(created, 201);
      const wh = created.json();
      await createContact(acc);
      const dispatcher = t.dispatcher({ allowPrivate: false });
      try {
        expect(await dispatcher.drain()).toBe(1);
      } finally {
        await dispatcher.stop();
      }
      expect(rcv.requests).toHaveLength(0);
      const log = (
        await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` })
      ).json();
      expect(log.total).toBe(1);
      expect(log.data[0]).toMatchObject({
        attempt: 1,
        status_code: null,
        error: expect.stringMatching(/private/i),
      });
      // It stays a failure on every retry.
      t.clock.advance(5_000);
      const again = t.dispatcher({ allowPrivate: false });
      await again.drain();
      await again.stop();
      expect(rcv.requests).toHaveLength(0);
      expect(
        (await acc.call({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries` })).json().total,
      ).toBe(2);
    } finally {
      await rcv.close();
    }
  });
});

describe('registration without ALLOW_PRIVATE_TARGETS', () => {
  let t: WebhookTestApp;
  beforeAll(async () => {
    t = await startWebhookTestApp({ config: { allowPrivateTargets: false } });
  });
  afterAll(() => t.close());

  it.each([
    'https://127.0.0.1/x',
    'https://10.0.0.1/x',
    'https://192.168.1.10/x',
    'https://[::1]/x',
    'https://[::ffff:127.0.0.1]/x',
    // IPv4-compatible: WHATWG URL makes these [::a9fe:a9fe] and [::7f00:1].
    'https://[::169.254.169.254]/x',
    'https://[::127.0.0.1]/x',
    'https://[64:ff9b::7f00:1]/x',
    'https://[2002:a9fe:a9fe::1]/x',
    'https://169.254.169.254/x',
    'https://localhost/x',
    'https://localhost./x',
    'https://api.localhost/x',
    'https://0.0.0.0/x',
  ])('registering %s is a 422', async (url) => {
    const acc = await newAccount(t);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/webhooks',
      payload: { url, events: ['contact.created'] },
    });
    expectError(res, 422);
    expect((await acc.call({ method: 'GET', url: '/v1/webhooks' })).json().total).toBe(0);
  });

  it.each([
    'https://93.184.215.14/x',
    // The same public address through NAT64 and 6to4: judged by the address inside.
    'https://[64:ff9b::5db8:d70e]/x',
    'https://[2002:5db8:d70e::1]/x',
  ])('a public https URL is still accepted: %s', async (url) => {
    const acc = await newAccount(t);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/webhooks',
      payload: { url, events: ['contact.created'] },
    });
    expectStatus(res, 201);
  });
});

describe('guardedFetch', () => {
  const base: Omit<GuardedRequest, 'url'> = {
    method: 'POST',
    body: '{}',
    timeoutMs: 5_000,
    maxBytes: 0,
    discardBody: true,
    maxRedirects: 0,
    allowPrivate: false,
  };

  it.each([
    'https://127.0.0.1:9/x',
    'https://10.1.2.3/x',
    'https://[::1]:9/x',
    'https://169.254.169.254/latest/meta-data',
    'https://[::169.254.169.254]/latest/meta-data',
    'https://[::127.0.0.1]:9/x',
  ])('refuses the IP literal %s without connecting', async (url) => {
    const err = await guardedFetch({ ...base, url }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OutboundError);
    expect(err).toMatchObject({ kind: 'refused', message: expect.stringMatching(/private/i) });
  });

  it('refuses a host name that resolves to 127.0.0.1 (localhost), checked on the address connected to', async () => {
    const err = await guardedFetch({ ...base, url: 'https://localhost:9/x' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OutboundError);
    expect(err).toMatchObject({ kind: 'refused', message: expect.stringMatching(/private/i) });
  });

  it('refuses a host name resolving to a private address even when a server listens there', async () => {
    const rcv = await startHttpsServer(() => ({ status: 200 }));
    try {
      const err = await guardedFetch({ ...base, url: rcv.url('/x') }).catch((e: unknown) => e);
      expect(err).toMatchObject({ kind: 'refused' });
      expect(rcv.requests).toHaveLength(0);
      // The same request with allowPrivate reaches it: the refusal was the guard's.
      const ok = await guardedFetch({ ...base, url: rcv.url('/x'), allowPrivate: true });
      expect(ok.status).toBe(200);
      expect(rcv.requests).toHaveLength(1);
    } finally {
      await rcv.close();
    }
  });

  it('refuses http:// and URLs with credentials', async () => {
    await expect(
      guardedFetch({ ...base, url: 'http://example.com/x', allowPrivate: true }),
    ).rejects.toMatchObject({ kind: 'refused' });
    await expect(
      guardedFetch({ ...base, url: 'https://u:p@example.com/x', allowPrivate: true }),
    ).rejects.toMatchObject({ kind: 'refused' });
  });
});
