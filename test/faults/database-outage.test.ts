import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded/index.js';
import { openStore, startService, type RunningService, type Store } from '../../src/server.js';
import { freePort } from '../e2e/process.js';
import { createPrivateDatabase } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { TcpProxy } from '../tcp-proxy.js';
import { TEST_SECRETS_KEY } from '../secrets-key.js';

// The database going away under a running service, and coming back: requests answer 503
// `unavailable` with Retry-After meanwhile (never 500, never a hang), /readyz says so, and the
// service recovers by itself with the work committed before the outage done after it.

const ADMIN = 'outage-admin-token-0123456789';
const TIMEOUT = 120_000;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => undefined);
});

async function serviceOn(databaseUrl: string): Promise<{ base: string; service: RunningService }> {
  const port = await freePort();
  const config: Config = {
    ...loadConfig({}),
    databaseUrl,
    secretsKey: TEST_SECRETS_KEY,
    port,
    host: '127.0.0.1',
    adminToken: ADMIN,
    logLevel: 'silent',
    allowPrivateTargets: true,
    sandboxAutoAdvance: true,
    // Queued when the message is sent and due while the database is down.
    sandboxDeliveredAfterMs: 1_500,
    sandboxReadAfterMs: 2_000,
  };
  const store: Store = await openStore(config);
  cleanups.push(() => store.close());
  const service = await startService(config, store);
  cleanups.push(() => service.stop());
  return { base: `http://127.0.0.1:${port}`, service };
}

interface Answer {
  status: number;
  body: { error?: { code: string }; [k: string]: unknown };
  headers: Headers;
  ms: number;
}

async function call(
  base: string,
  method: string,
  url: string,
  opts: { key?: string; admin?: boolean; body?: unknown } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.admin) headers.authorization = `Bearer ${ADMIN}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const started = Date.now();
  const res = await fetch(base + url, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return {
    status: res.status,
    body: text ? (JSON.parse(text) as Answer['body']) : {},
    headers: res.headers,
    ms: Date.now() - started,
  };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The scenario, on whatever sits between the service and its database: `down` takes the
 * database away and `up` brings it back.
 */
async function outageScenario(
  databaseUrl: string,
  down: () => Promise<void>,
  up: () => Promise<void>,
) {
  const { base } = await serviceOn(databaseUrl);
  const receiver = await startHttpsServer((req) =>
    // The first attempt fails with a Retry-After that falls inside the outage.
    req === receiver.requests[0]
      ? { status: 503, headers: { 'retry-after': '3' } }
      : { status: 204 },
  );
  cleanups.push(() => receiver.close());

  const account = await call(base, 'POST', '/admin/accounts', {
    admin: true,
    body: { name: 'Outage', plan: 'growth' },
  });
  expect(account.status).toBe(201);
  const key = await call(base, 'POST', `/admin/accounts/${String(account.body.id)}/api-keys`, {
    admin: true,
    body: {},
  });
  const apiKey = String(key.body.api_key);
  const hook = await call(base, 'POST', '/v1/webhooks', {
    key: apiKey,
    body: { url: receiver.url('/hook'), events: ['contact.created'] },
  });
  expect(hook.status).toBe(201);

  // Work committed before the outage: a contact.created delivery whose retry is due during it,
  // and the sandbox's status jobs for a sent message, due during it too.
  const inbound = await call(base, 'POST', '/v1/sandbox/inbound', {
    key: apiKey,
    body: { channel: 'whatsapp', phone: '+14155550123', type: 'text', content: 'hi' },
  });
  expect(inbound.status).toBe(201);
  await waitFor('the first delivery attempt', async () =>
    receiver.requests.length >= 1 ? true : undefined,
  );
  const contacts = await call(base, 'GET', '/v1/contacts', { key: apiKey });
  const contactId = String((contacts.body.data as { id: string }[])[0]!.id);
  const sent = await call(base, 'POST', '/v1/messages/send', {
    key: apiKey,
    body: { contact_id: contactId, channel: 'whatsapp', type: 'text', content: 'hello back' },
  });
  expect(sent.status).toBe(201);
  // The failed attempt's bookkeeping (the retry's due time) is committed.
  await new Promise((r) => setTimeout(r, 300));

  await down();
  const outageStarted = Date.now();

  for (const [method, url, body] of [
    ['GET', '/v1/contacts', undefined],
    ['GET', `/v1/conversations/${String(sent.body.conversation_id)}`, undefined],
    ['POST', '/v1/contacts', { phone: '+14155550199', name: 'Written during the outage' }],
  ] as const) {
    const res = await call(base, method, url, { key: apiKey, body });
    expect(res.status, `${method} ${url}: ${JSON.stringify(res.body)}`).toBe(503);
    expect(res.body.error?.code).toBe('unavailable');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(res.ms).toBeLessThan(10_000);
  }
  const notReady = await call(base, 'GET', '/readyz');
  expect(notReady.status).toBe(503);
  expect(notReady.body.error?.code).toBe('unavailable');
  expect((await call(base, 'GET', '/healthz')).status).toBe(200);

  // Long enough for the retry and the jobs to fall due while the database is away.
  await new Promise((r) => setTimeout(r, Math.max(0, 4_000 - (Date.now() - outageStarted))));
  expect(receiver.requests).toHaveLength(1);
  await up();

  await waitFor('readyz back to 200', async () =>
    (await call(base, 'GET', '/readyz')).status === 200 ? true : undefined,
  );
  const after = await call(base, 'GET', '/v1/contacts', { key: apiKey });
  expect(after.status).toBe(200);
  // The refused POST wrote nothing.
  expect((after.body.data as { name: string | null }[]).map((c) => c.name)).not.toContain(
    'Written during the outage',
  );
  expect(after.body.data).toHaveLength(1);

  // The delivery queued before the outage is retried after it, as the same message.
  await waitFor('the delivery retried after the outage', async () =>
    receiver.requests.length >= 2 ? true : undefined,
  );
  const [first, second] = receiver.requests;
  expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
  expect(JSON.parse(second!.body.toString())).toMatchObject({ event: 'contact.created' });

  // The status jobs queued before the outage ran after it.
  await waitFor('the sent message to reach read', async () => {
    const conv = await call(base, 'GET', `/v1/conversations/${String(sent.body.conversation_id)}`, {
      key: apiKey,
    });
    const messages = conv.body.messages as { id: string; status: string }[] | undefined;
    return messages?.find((m) => m.id === sent.body.id)?.status === 'read' ? true : undefined;
  });
}

describe.runIf(process.platform === 'linux')('database outage under a running service', () => {
  it(
    'embedded PostgreSQL stopped and started again: 503 unavailable meanwhile, then recovery with nothing lost',
    async () => {
      const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'switchboard-outage-'));
      await fs.chmod(dataDir, 0o755); // the server may run as the postgres user
      cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
      const embedded: EmbeddedPostgres = await startEmbeddedPostgres({ dataDir });
      cleanups.push(() => embedded.stop());
      await outageScenario(
        embedded.url,
        () => embedded.stopServer(),
        () => embedded.startServer(),
      );
    },
    TIMEOUT,
  );

  it(
    'external PostgreSQL cut off by the network and reconnected: 503 unavailable meanwhile, then recovery with nothing lost',
    async () => {
      // Its own database, so that no other file's workers deliver or run its work.
      const database = await createPrivateDatabase();
      cleanups.push(() => database.drop());
      const url = new URL(database.url);
      const proxy = await new TcpProxy(Number(url.port || 5432), url.hostname).start();
      cleanups.push(() => proxy.close());
      url.port = String(proxy.port);
      await outageScenario(
        url.toString(),
        () => proxy.cut(),
        () => proxy.restore(),
      );
    },
    TIMEOUT,
  );
});
