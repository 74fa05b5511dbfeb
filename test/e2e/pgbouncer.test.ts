import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseClient } from '../events/sse-client.js';
import { createPrivateDatabase } from '../helpers.js';
import { pgbouncerBinary, startBouncer, type Bouncer } from './pgbouncer.js';
import { startService, stopProcess, type ServiceProcess } from './process.js';

const ADMIN = 'e2e-admin-token-pgbouncer-0123';
const binary = pgbouncerBinary();

// CI installs Debian's pgbouncer (.ci/run); elsewhere the file is skipped without it.
describe.skipIf(!binary && !process.env.CI)('behind PgBouncer in transaction mode', () => {
  let database: { url: string; drop: () => Promise<void> };
  let bouncer: Bouncer;
  let service: ServiceProcess;
  let key: string;

  const call = async (method: string, url: string, body?: unknown, headers = {}) => {
    const res = await fetch(`${service.base}${url}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    // Not migrated: the service migrates it at start, over DATABASE_DIRECT_URL.
    database = await createPrivateDatabase({ migrated: false });
    // Three server connections for twenty pooled clients and a worker: every transaction may
    // land on another one, as in production.
    bouncer = await startBouncer(binary!, database.url, 3);
    service = await startService({
      DATABASE_URL: bouncer.url,
      DATABASE_DIRECT_URL: database.url,
      ADMIN_TOKEN: ADMIN,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      SANDBOX_DELIVERED_AFTER_MS: '50',
      SANDBOX_READ_AFTER_MS: '100',
    });
    const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
    const account = (await (
      await fetch(`${service.base}/admin/accounts`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ name: 'Pooled', plan: 'growth', rate_limit_per_minute: 100_000 }),
      })
    ).json()) as { id: string };
    key = (
      (await (
        await fetch(`${service.base}/admin/accounts/${account.id}/api-keys`, {
          method: 'POST',
          headers: admin,
          body: '{}',
        })
      ).json()) as { api_key: string }
    ).api_key;
  }, 120_000);

  afterAll(async () => {
    if (service) await stopProcess(service);
    await bouncer?.stop();
    await database?.drop();
  });

  it('serves writes, reads, sends and a broadcast at once, with the live stream listening past the pooler', async () => {
    const stream = await SseClient.open(`${service.base}/v1/events/stream?events=contact.created`, {
      authorization: `Bearer ${key}`,
    });
    try {
      expect(stream.status).toBe(200);
      const phones = Array.from(
        { length: 40 },
        (_, i) => `+1415555${String(1000 + i).padStart(4, '0')}`,
      );
      const created = await Promise.all(
        phones.map((phone, i) =>
          call(
            'POST',
            '/v1/contacts',
            { phone, name: `Pooled ${i}`, tags: ['pooled'] },
            { 'idempotency-key': `create-${i}` },
          ),
        ),
      );
      expect(created.map((c) => c.status)).toEqual(phones.map(() => 201));
      const ids = created.map((c) => c.json.id as string);
      // The same requests again replay their first answers.
      const replayed = await Promise.all(
        phones
          .slice(0, 5)
          .map((phone, i) =>
            call(
              'POST',
              '/v1/contacts',
              { phone, name: `Pooled ${i}`, tags: ['pooled'] },
              { 'idempotency-key': `create-${i}` },
            ),
          ),
      );
      expect(replayed.map((r) => r.json.id)).toEqual(ids.slice(0, 5));

      // Ten of them write in (the sandbox's inbound), which opens their 24-hour windows.
      const inbound = await Promise.all(
        phones.slice(0, 10).map((phone) =>
          call('POST', '/v1/sandbox/inbound', {
            channel: 'whatsapp',
            phone,
            type: 'text',
            content: 'Hi',
          }),
        ),
      );
      expect(inbound.map((r) => r.status)).toEqual(inbound.map(() => 201));

      // Reads of every kind (prepared and planned per value alike), and sends, side by side.
      const [list, tagged, search, ...sends] = await Promise.all([
        call('GET', '/v1/contacts?limit=100'),
        call('GET', '/v1/contacts?tag=pooled&limit=100'),
        call('GET', '/v1/contacts?search=Pooled%2012'),
        ...ids.slice(0, 10).map((id) =>
          call('POST', '/v1/messages/send', {
            contact_id: id,
            channel: 'whatsapp',
            type: 'text',
            content: 'Hello through the pooler',
          }),
        ),
      ]);
      expect(list.json.total).toBe(40);
      expect(tagged.json.total).toBe(40);
      expect(search.status).toBe(200);
      expect(sends.map((s) => s.status)).toEqual(sends.map(() => 201));

      // Every event reaches the open stream as it commits: LISTEN works on the direct session.
      await stream.until(
        () => stream.messages.filter((m) => m.event === 'contact.created').length >= 40,
        15_000,
        'every contact.created on the stream',
      );
      const streamed = stream.messages
        .filter((m) => m.event === 'contact.created')
        .map((m) => (JSON.parse(m.data) as { data: { id: string } }).data.id);
      expect(streamed.sort()).toEqual([...ids].sort());

      // A broadcast runs to its end on the workers, through the pooler too.
      const broadcast = await call('POST', '/v1/broadcasts', {
        name: 'Pooled',
        channel: 'whatsapp',
        audience: { tags: ['pooled'] },
        message: { type: 'text', content: 'News' },
      });
      expect(broadcast.status).toBe(201);
      let state: Record<string, unknown> = broadcast.json;
      for (let i = 0; i < 60 && state.status !== 'sent'; i++) {
        await new Promise((r) => setTimeout(r, 500));
        state = (await call('GET', `/v1/broadcasts/${broadcast.json.id as string}`)).json;
      }
      // Sent to the ten inside their window; the other thirty need a template, and failed.
      expect(state).toMatchObject({ status: 'sent', stats: { sent: 10, failed: 30 } });

      const log = service.stdout() + service.stderr();
      expect(log).not.toMatch(/notifications off/);
      expect(log).not.toMatch(/prepared statement/);
      expect(log).not.toMatch(/"level":50/);
    } finally {
      stream.close();
    }
  }, 90_000);
});
