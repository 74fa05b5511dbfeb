import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelProvider } from '../../src/channels/channel.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { startHttpsServer, type Reply } from '../https-server.js';
import { createContact, expectStatus, receive } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from '../webhooks/webhook-helpers.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/g;

/** Parses Prometheus text exposition, failing on any line that is not a comment or a sample. */
function parseExposition(text: string): Sample[] {
  expect(text.endsWith('\n')).toBe(true);
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      expect(line, 'a comment line is HELP or TYPE').toMatch(
        /^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram|summary|untyped))$/,
      );
      continue;
    }
    const m = SAMPLE.exec(line);
    expect(m, `a sample line: ${line}`).not.toBeNull();
    const labels: Record<string, string> = {};
    const body = m![2] ?? '';
    let consumed = 0;
    for (const l of body.matchAll(LABEL)) {
      labels[l[1]!] = l[2]!;
      consumed += l[0].length;
    }
    expect(consumed, `labels of: ${line}`).toBe(body.length);
    // Prometheus reads NaN in any case (prom-client writes `Nan` for an empty mean).
    const value = /^nan$/i.test(m![3]!) ? NaN : Number(m![3]);
    expect(Number.isNaN(value) && !/^nan$/i.test(m![3]!), `value of: ${line}`).toBe(false);
    samples.push({ name: m![1]!, labels, value });
  }
  return samples;
}

/** The value of the one sample with this name and exactly these labels, or undefined. */
function valueOf(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const want = Object.entries(labels);
  const hits = samples.filter(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === want.length &&
      want.every(([k, v]) => s.labels[k] === v),
  );
  expect(hits.length, `${name} ${JSON.stringify(labels)}`).toBeLessThanOrEqual(1);
  return hits[0]?.value;
}

async function scrape(t: Pick<TestApp, 'app'>, opts: Partial<InjectOptions> = {}) {
  const res = await t.app.inject({ method: 'GET', url: '/metrics', ...opts });
  expectStatus(res, 200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return { text: res.body, samples: parseExposition(res.body) };
}

const REQUESTS = 'switchboard_http_request_duration_seconds_count';
const CONTACT_ROUTE = { route: '/v1/contacts/:id', method: 'GET', status_code: '200' };

describe('GET /metrics on the shared database', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it('is Prometheus text with every metric prefixed switchboard_, process metrics included', async () => {
    const { text, samples } = await scrape(t);
    expect(samples.length).toBeGreaterThan(20);
    for (const s of samples) expect(s.name).toMatch(/^switchboard_/);
    for (const line of text.split('\n').filter((l) => l.startsWith('# TYPE ')))
      expect(line).toMatch(/^# TYPE switchboard_/);
    expect(valueOf(samples, 'switchboard_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE switchboard_nodejs_eventloop_lag_seconds gauge');
    // Known job kinds are reported while none is queued, broadcast outcomes from the start.
    for (const kind of ['sandbox.status', 'broadcast.send'])
      expect(valueOf(samples, 'switchboard_jobs_queued', { kind })).toBeGreaterThanOrEqual(0);
    expect(valueOf(samples, 'switchboard_broadcast_recipients_total', { outcome: 'sent' })).toBe(0);
    expect(valueOf(samples, 'switchboard_webhook_deliveries_pending')).toBeGreaterThanOrEqual(0);
  });

  it('needs no API key and is left out of the OpenAPI document', async () => {
    const doc = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(Object.keys(doc.json<{ paths: object }>().paths)).not.toContain('/metrics');
  });

  it('counts requests by route pattern, method and status, and times them', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const before = (await scrape(t)).samples;
    for (let i = 0; i < 3; i++)
      expectStatus(await acc.call({ method: 'GET', url: `/v1/contacts/${contact.id}` }), 200);
    expectStatus(await acc.call({ method: 'GET', url: '/v1/contacts/ctc_nobody' }), 404);
    expectStatus(await t.app.inject({ method: 'GET', url: '/no/such/route/123' }), 404);
    expectStatus(await t.app.inject({ method: 'GET', url: `/v1/contacts/${contact.id}` }), 401);
    const after = (await scrape(t)).samples;
    const moved = (labels: Record<string, string>) =>
      (valueOf(after, REQUESTS, labels) ?? 0) - (valueOf(before, REQUESTS, labels) ?? 0);
    expect(moved(CONTACT_ROUTE)).toBe(3);
    expect(moved({ ...CONTACT_ROUTE, status_code: '404' })).toBe(1);
    expect(moved({ ...CONTACT_ROUTE, status_code: '401' })).toBe(1);
    expect(moved({ route: 'unmatched', method: 'GET', status_code: '404' })).toBeGreaterThanOrEqual(
      1,
    );
    // The histogram: cumulative buckets ending in +Inf, which equals the count.
    const inf = valueOf(after, 'switchboard_http_request_duration_seconds_bucket', {
      ...CONTACT_ROUTE,
      le: '+Inf',
    });
    expect(inf).toBe(valueOf(after, REQUESTS, CONTACT_ROUTE));
    expect(
      valueOf(after, 'switchboard_http_request_duration_seconds_sum', CONTACT_ROUTE),
    ).toBeGreaterThan(0);
  });

  it('labels carry no account id, contact id, key or raw path', async () => {
    const accounts = [await newAccount(t), await newAccount(t)];
    const secrets: string[] = [];
    for (const acc of accounts) {
      const contact = await createContact(acc);
      secrets.push(acc.accountId, acc.apiKey, acc.keyId, contact.id, contact.phone);
      expectStatus(await acc.call({ method: 'GET', url: `/v1/contacts/${contact.id}` }), 200);
      expectStatus(
        await acc.call({
          method: 'PUT',
          url: `/v1/contacts/${contact.id}`,
          payload: { name: 'Ada' },
        }),
        200,
      );
      expectStatus(
        await acc.call({ method: 'GET', url: `/v1/contacts/${contact.id}/nope?x=${contact.id}` }),
        404,
      );
    }
    const { text, samples } = await scrape(t);
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(text).not.toContain('/nope');
    const routes = new Set(samples.flatMap((s) => (s.labels.route ? [s.labels.route] : [])));
    for (const route of routes) expect(route === 'unmatched' || route.includes('/')).toBe(true);
    for (const route of routes) expect(route).not.toMatch(/ctc_|acc_|key_/);
  });
});

describe('METRICS_TOKEN', () => {
  const token = 'metrics-token-0123456789';
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ config: { metricsToken: token } });
  });
  afterAll(() => t.close());

  it('when set, /metrics needs it as a bearer token: 401 in the error envelope otherwise', async () => {
    for (const authorization of [
      undefined,
      'Bearer wrong-token-0123456789',
      token,
      `Bearer ${token}x`,
    ]) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(res.statusCode, String(authorization)).toBe(401);
      expect(res.json()).toEqual({
        error: { code: 'unauthorized', message: expect.any(String) as string },
      });
    }
    await scrape(t, { headers: { authorization: `Bearer ${token}` } });
  });

  it('is validated at start: at least 16 characters', () => {
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(ConfigError);
    expect(loadConfig({ METRICS_TOKEN: token }).metricsToken).toBe(token);
    expect(loadConfig({}).metricsToken).toBeNull();
  });
});

describe('with the database unreachable', () => {
  let t: TestApp;
  beforeAll(async () => {
    // Nothing listens on port 1: every query fails at once.
    t = await startTestApp({
      databaseUrl: 'postgres://postgres@127.0.0.1:1/none',
      readCache: false,
    });
  });
  afterAll(() => t.close());

  it('the process metrics are still served, and the queue gauges left out rather than stale', async () => {
    const { text, samples } = await scrape(t);
    expect(valueOf(samples, 'switchboard_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE switchboard_jobs_queued gauge');
    expect(samples.filter((s) => /^switchboard_(jobs|webhook_deliveries)_/.test(s.name))).toEqual(
      [],
    );
  });
});

describe('provider errors', () => {
  const failing: ChannelProvider = {
    name: 'webchat',
    templatesBypassWindow: true,
    reachesAnyContact: false,
    send: () => Promise.resolve({ status: 'failed', reason: '(#131026) Message undeliverable' }),
  };
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ providers: { webchat: failing } });
  });
  afterAll(() => t.close());

  it('a send the provider fails is counted by channel and provider name', async () => {
    const acc = await newAccount(t);
    // A real provider reaches only a contact known on its channel: a webchat visitor.
    const contact = await t.db
      .transaction()
      .execute((trx) =>
        t.services.contacts.findOrCreateByIdentity(trx, acc.accountId, 'webchat', 'visitor-1'),
      );
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'hi' },
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({
      status: 'failed',
      failure_reason: '(#131026) Message undeliverable',
    });
    const { samples } = await scrape(t);
    expect(
      valueOf(samples, 'switchboard_provider_errors_total', {
        channel: 'webchat',
        provider: 'webchat',
      }),
    ).toBe(1);
  });
});

// Queue gauges count every account's rows, so these run on a database of their own.
describe('queues, webhook deliveries and broadcasts (own database)', () => {
  let t: WebhookTestApp;
  beforeAll(async () => {
    t = await startWebhookTestApp();
  });
  afterAll(() => t.close());

  it('job gauges reflect the jobs table: queued, due, dead and the age of the oldest due job, by kind', async () => {
    const acc = await newAccount(t);
    const now = t.clock.now().getTime();
    const job = (
      id: string,
      runAt: number,
      lockedUntil: number | null = null,
      deadAt: number | null = null,
    ) => ({
      account_id: acc.accountId,
      id,
      kind: 'broadcast.send',
      payload: JSON.stringify({ v: 1, broadcast_id: 'brd_none' }),
      run_at: new Date(runAt),
      locked_until: lockedUntil === null ? null : new Date(lockedUntil),
      dead_at: deadAt === null ? null : new Date(deadAt),
      created_at: new Date(now - 60_000),
    });
    await t.db
      .insertInto('jobs')
      .values([
        job('job_metrics_1', now - 30_000),
        job('job_metrics_2', now - 5_000),
        job('job_metrics_3', now + 60_000),
        // Running: a worker holds its lease.
        job('job_metrics_4', now - 90_000, now + 30_000),
        // Dead: its retries ran out; counted apart, never as queued or due.
        job('job_metrics_5', now - 120_000, null, now - 10_000),
      ])
      .execute();
    try {
      const { samples } = await scrape(t);
      const kind = { kind: 'broadcast.send' };
      expect(valueOf(samples, 'switchboard_jobs_queued', kind)).toBe(4);
      expect(valueOf(samples, 'switchboard_jobs_due', kind)).toBe(2);
      expect(valueOf(samples, 'switchboard_jobs_dead', kind)).toBe(1);
      expect(valueOf(samples, 'switchboard_jobs_oldest_due_age_seconds', kind)).toBe(30);
      const idle = { kind: 'sandbox.status' };
      expect(valueOf(samples, 'switchboard_jobs_queued', idle)).toBe(0);
      expect(valueOf(samples, 'switchboard_jobs_oldest_due_age_seconds', idle)).toBe(0);
    } finally {
      await t.db.deleteFrom('jobs').where('account_id', '=', acc.accountId).execute();
    }
    const { samples } = await scrape(t);
    expect(valueOf(samples, 'switchboard_jobs_queued', { kind: 'broadcast.send' })).toBe(0);
  });

  it('webhook deliveries: queue depth, then attempts counted by outcome and status class, and timed', async () => {
    const replies: Reply[] = [{ status: 200 }, { status: 500 }, { status: 410 }];
    const rcv = await startHttpsServer(() => replies.shift() ?? { status: 200 });
    try {
      const acc = await newAccount(t);
      const hook = await acc.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: rcv.url('/hook'), events: ['contact.created'] },
      });
      expectStatus(hook, 201);
      const dispatcher = t.dispatcher({ metrics: t.services.metrics, accountId: acc.accountId });
      const attempts = (samples: Sample[], outcome: string, cls: string) =>
        valueOf(samples, 'switchboard_webhook_attempts_total', {
          outcome,
          status_class: cls,
        }) ?? 0;

      await createContact(acc);
      t.clock.advance(2_000);
      let { samples } = await scrape(t);
      expect(valueOf(samples, 'switchboard_webhook_deliveries_pending')).toBe(1);
      expect(valueOf(samples, 'switchboard_webhook_deliveries_due')).toBe(1);
      expect(valueOf(samples, 'switchboard_webhook_deliveries_oldest_due_age_seconds')).toBe(2);

      expect(await dispatcher.drain()).toBe(1); // 200
      await createContact(acc);
      expect(await dispatcher.drain()).toBe(1); // 500: retried later
      ({ samples } = await scrape(t));
      expect(attempts(samples, 'success', '2xx')).toBe(1);
      expect(attempts(samples, 'failure', '5xx')).toBe(1);
      expect(valueOf(samples, 'switchboard_webhook_deliveries_pending')).toBe(1);
      expect(valueOf(samples, 'switchboard_webhook_deliveries_due')).toBe(0);

      t.clock.advance(10_000);
      expect(await dispatcher.drain()).toBe(1); // 410 Gone: given up, webhook disabled
      ({ samples } = await scrape(t));
      expect(attempts(samples, 'gave_up', '4xx')).toBe(1);
      expect(valueOf(samples, 'switchboard_webhook_deliveries_pending')).toBe(0);
      expect(
        valueOf(samples, 'switchboard_webhook_attempt_duration_seconds_count', {
          status_class: '2xx',
        }),
      ).toBe(1);
      expect(rcv.requests).toHaveLength(3);
      await dispatcher.stop();

      // No HTTP answer at all: a port nobody listens on.
      const acc2 = await newAccount(t);
      const closed = await startHttpsServer();
      const deadUrl = closed.url('/hook');
      await closed.close();
      expectStatus(
        await acc2.call({
          method: 'POST',
          url: '/v1/webhooks',
          payload: { url: deadUrl, events: ['contact.created'] },
        }),
        201,
      );
      await createContact(acc2);
      const d2 = t.dispatcher({ metrics: t.services.metrics, accountId: acc2.accountId });
      expect(await d2.drain()).toBe(1);
      await d2.stop();
      ({ samples } = await scrape(t));
      expect(attempts(samples, 'failure', 'network')).toBe(1);
      expect(samples.some((s) => JSON.stringify(s.labels).includes('localhost'))).toBe(false);
    } finally {
      await rcv.close();
    }
  });

  it('broadcast recipients processed are counted by outcome once their batch commits', async () => {
    const acc: TestAccount = await newAccount(t);
    const inWindow = await createContact(acc);
    await receive(acc, inWindow.id, 'whatsapp');
    await createContact(acc);
    await createContact(acc);
    const before = (await scrape(t)).samples;
    const res = await acc.call({
      method: 'POST',
      url: '/v1/broadcasts',
      payload: {
        name: 'News',
        channel: 'whatsapp',
        audience: { all: true },
        message: { type: 'text', content: 'Big news!' },
      },
    });
    expectStatus(res, 201);
    const runner = new JobRunner({
      db: t.db,
      clock: t.clock,
      log: t.app.log,
      handlers: t.services.jobHandlers,
      accountId: acc.accountId,
    });
    await runner.drain();
    await runner.stop();
    const after = (await scrape(t)).samples;
    const moved = (outcome: string) =>
      valueOf(after, 'switchboard_broadcast_recipients_total', { outcome })! -
      valueOf(before, 'switchboard_broadcast_recipients_total', { outcome })!;
    // Outside the 24-hour window of a whatsapp text: failed, never sent.
    expect(moved('sent')).toBe(1);
    expect(moved('failed')).toBe(2);
  });
});
