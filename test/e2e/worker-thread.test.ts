// The all-in-one service (`switchboard serve`, `npm start`) runs its workers on a thread of their
// own (WORKER_THREAD, on by default): they work every job as before, their counters show in the
// API's /metrics, and the process stops cleanly with both.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { randomPhone } from '../helpers.js';
import { threadNice } from '../runtime/thread-nice.js';
import { testDatabaseUrl } from '../database.js';
import { startService, type ServiceProcess } from './process.js';

const ADMIN = 'e2e-admin-token-0123456789';
const METRICS = 'e2e-metrics-token-0123456789';

interface Started {
  pid: number;
  msg: string;
  api?: boolean;
  workers?: boolean | 'thread';
}

/** The lines that say a part of the process started, in order. */
function startedLines(p: ServiceProcess): Started[] {
  return p
    .stdout()
    .split('\n')
    .filter((line) =>
      /"msg":"(switchboard started|the workers started on their thread)"/.test(line),
    )
    .map((line) => JSON.parse(line) as Started);
}

async function newAccountKey(base: string): Promise<string> {
  const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
  const account = (await (
    await fetch(`${base}/admin/accounts`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'Thread', plan: 'growth' }),
    })
  ).json()) as { id: string };
  const key = (await (
    await fetch(`${base}/admin/accounts/${account.id}/api-keys`, {
      method: 'POST',
      headers: admin,
      body: '{}',
    })
  ).json()) as { api_key: string };
  return key.api_key;
}

/**
 * The application names of the sessions opened on this file's database since `since` (files of
 * other test workers use databases of their own), the harness's own left out.
 */
async function sessionNames(since: Date): Promise<string[]> {
  const client = new pg.Client({ connectionString: testDatabaseUrl() });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      `SELECT DISTINCT application_name AS name FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_start >= $1
        ORDER BY 1`,
      [since],
    );
    return rows.map((r) => r.name);
  } finally {
    await client.end();
  }
}

/** A broadcast to three new contacts, polled until the workers have sent it. */
async function broadcastSent(base: string, key: string): Promise<void> {
  const call = (method: string, url: string, body?: unknown) =>
    fetch(`${base}${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  for (let i = 0; i < 3; i++) {
    const res = await call('POST', '/v1/contacts', { phone: randomPhone(), tags: ['thread'] });
    expect(res.status).toBe(201);
  }
  const created = await call('POST', '/v1/broadcasts', {
    name: 'On the thread',
    channel: 'webchat',
    audience: { tags: ['thread'] },
    message: { type: 'text', content: 'Hello from the worker thread' },
  });
  expect(created.status, await created.clone().text()).toBe(201);
  const { id } = (await created.json()) as { id: string };
  await expect
    .poll(
      async () =>
        ((await (await call('GET', `/v1/broadcasts/${id}`)).json()) as { status: string }).status,
      { timeout: 20_000, interval: 200 },
    )
    .toBe('sent');
}

describe('the all-in-one service', () => {
  const running: ServiceProcess[] = [];
  afterEach(async () => {
    for (const p of running.splice(0)) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  });

  const start = async (env: Record<string, string> = {}) => {
    const p = await startService(
      {
        DATABASE_URL: testDatabaseUrl(),
        ADMIN_TOKEN: ADMIN,
        METRICS_TOKEN: METRICS,
        LOG_LEVEL: 'info',
        ...env,
      },
      ['serve'],
    );
    running.push(p);
    return p;
  };

  it('runs the workers on a thread of their own: jobs worked, counters in /metrics, clean stop', async () => {
    const since = new Date();
    const p = await start();
    // One process, two threads: the workers' first, then the API's, whose line comes once it
    // listens (what a script waiting for "switchboard started" relies on).
    await expect.poll(() => startedLines(p).length, { timeout: 20_000 }).toBe(2);
    expect(startedLines(p)).toMatchObject([
      { pid: p.child.pid, msg: 'the workers started on their thread' },
      { pid: p.child.pid, msg: 'switchboard started', api: true, workers: 'thread' },
    ]);

    await broadcastSent(p.base, await newAccountKey(p.base));
    // The recipients are counted on the workers' thread, and shown by the API's registry.
    const metrics = await (
      await fetch(`${p.base}/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })
    ).text();
    const sent = /^switchboard_broadcast_recipients_total\{outcome="sent"\} (\d+)$/m.exec(metrics);
    expect(Number(sent?.[1])).toBeGreaterThanOrEqual(3);
    // The process-wide series appear once, not once per thread.
    expect(metrics.match(/^switchboard_process_resident_memory_bytes /gm)).toHaveLength(1);
    // An operator tells the API's sessions from the workers' in pg_stat_activity.
    expect(await sessionNames(since)).toEqual(['switchboard-api', 'switchboard-workers']);
    // The workers' thread alone runs below the API (WORKER_THREAD_NICE, 10 by default); the
    // main thread and the rest (libuv's pool, which the API uses too) keep their priority.
    if (process.platform === 'linux') {
      const nice = threadNice(p.child.pid!);
      expect(nice.get(p.child.pid!)).toBe(0);
      expect([...nice.values()].filter((n) => n !== 0)).toEqual([10]);
    }

    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
  });

  it('with WORKER_THREAD=false runs them on the API event loop, as before', async () => {
    const since = new Date();
    const p = await start({ WORKER_THREAD: 'false' });
    await expect.poll(() => startedLines(p).length, { timeout: 20_000 }).toBe(1);
    expect(startedLines(p)[0]).toMatchObject({
      msg: 'switchboard started',
      api: true,
      workers: true,
    });
    await broadcastSent(p.base, await newAccountKey(p.base));
    expect(await sessionNames(since)).toEqual(['switchboard']);
    if (process.platform === 'linux')
      expect([...threadNice(p.child.pid!).values()].filter((n) => n !== 0)).toEqual([]);
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(0);
  });
});
