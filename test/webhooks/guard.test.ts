import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedFetch, OutboundError, type GuardedRequest } from '../../src/net/guarded-fetch.js';
import { startFailingServers } from '../failing-servers.js';
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

describe('a webhook URL that cannot be reached', () => {
  let t: WebhookTestApp;
  let failing: Awaited<ReturnType<typeof startFailingServers>>;
  beforeAll(async () => {
    t = await startWebhookTestApp();
    failing = await startFailingServers();
  });
  afterAll(async () => {
    await failing.close();
    await t.close();
  });

  it(
    'is logged in one wording whether the name does not resolve or the port refuses, resets, closes, speaks no TLS or stays silent',
    { timeout: 30_000 },
    async () => {
      const acc = await newAccount(t);
      const urls: Record<string, string> = { 'no such name': 'https://nowhere.invalid/hook' };
      for (const [failure, port] of Object.entries(failing.ports))
        urls[failure] = `https://localhost:${port}/hook`;
      const ids: Record<string, string> = {};
      for (const [failure, url] of Object.entries(urls)) {
        const created = await acc.call({
          method: 'POST',
          url: '/v1/webhooks',
          payload: { url, events: ['contact.created'] },
        });
        expectStatus(created, 201);
        ids[failure] = created.json<{ id: string }>().id;
      }
      await createContact(acc);
      const dispatcher = t.dispatcher();
      try {
        expect(await dispatcher.drain()).toBe(Object.keys(urls).length);
      } finally {
        await dispatcher.stop();
      }
      const logged: Record<string, unknown> = {};
      for (const [failure, id] of Object.entries(ids)) {
        const log = (await acc.call({ method: 'GET', url: `/v1/webhooks/${id}/deliveries` })).json<{
          data: { status_code: number | null; error: string }[];
        }>();
        expect(log.data[0]?.status_code, failure).toBeNull();
        logged[failure] = log.data[0]?.error;
      }
      const wording = 'no response: the connection failed or nothing came within 10000 ms';
      expect(logged).toEqual(Object.fromEntries(Object.keys(urls).map((f) => [f, wording])));
    },
  );
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

  it('a response that breaks off after its status line is incomplete, not a connection failure', async () => {
    const server = https.createServer(
      {
        key: readFileSync(new URL('../fixtures/tls/server.key', import.meta.url)),
        cert: readFileSync(new URL('../fixtures/tls/server.pem', import.meta.url)),
      },
      (_req, res) => {
        res.writeHead(200, { 'content-length': '100' });
        res.write('x', () => res.socket?.destroy());
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const err = await guardedFetch({
        ...base,
        url: `https://localhost:${port}/x`,
        allowPrivate: true,
        discardBody: false,
        maxBytes: 1000,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OutboundError);
      expect(err).toMatchObject({
        kind: 'incomplete',
        message: 'the response broke off or did not complete within 5000 ms',
      });
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
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
