/**
 * The soak test (`npm run soak`, opt-in; SOAK_MINUTES, 10 by default): two API processes
 * (`serve --no-workers`) and two `worker`s on a PostgreSQL, a PgBouncer and a Redis of its own,
 * behind a round-robin spreader, under mixed load with a 100,000-recipient WhatsApp broadcast,
 * webhook deliveries and 50 live event streams, while a worker and an API process are killed
 * (kill -9), PostgreSQL restarts and Redis stops for a while. Then it waits for everything to
 * drain, checks that nothing was lost or sent twice, prints the figures and the timeline, and
 * writes them as JSON under /tmp. Needs `npm run build` first (it runs dist/cli.js).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EVENT_TYPES } from '../../src/events/event-types.js';
import { delay, freePort } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { startFakeGraph, type FakeGraph } from '../lib/graph.js';
import { expectJson, stringField } from '../lib/http.js';
import { startWebhookReceiver, type WebhookReceiver } from '../lib/receiver.js';
import { readRssBytes } from '../lib/rss.js';
import { insertTaggedContacts } from '../lib/seed.js';
import type { BenchAccount, ServiceHandle } from '../lib/service.js';
import {
  BENCH_TEMPLATE,
  approvedTemplate,
  connectWhatsApp,
  createTemplateBroadcast,
} from '../lib/whatsapp.js';
import {
  PostgresCluster,
  Redis,
  ServiceProcess,
  Spreader,
  startPgBouncer,
  tempDir,
} from './infra.js';
import { MixedLoad } from './load.js';
import { checkAndReport, type Soak } from './report.js';
import { openStreams } from './streams.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const RECIPIENTS = Number(process.env.SOAK_RECIPIENTS ?? 100_000);
const BROADCAST_RATE = process.env.SOAK_BROADCAST_RATE ?? '1000';
const STREAMS = 50;
const RSS_EVERY_MS = 5_000;
const BENCH_LOCK = '/tmp/bench.lock';
const SOAK_LOCK = '/tmp/soak.lock';
const ADMIN = randomBytes(16).toString('hex');
const SECRETS_KEY = randomBytes(32).toString('base64');

const cleanups: (() => unknown)[] = [];
async function cleanUp(): Promise<void> {
  for (const fn of cleanups.splice(0).reverse()) {
    try {
      await fn();
    } catch (err) {
      process.stderr.write(`cleanup: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
}

/**
 * Whether the soak runs under `flock /tmp/bench.lock` (an ancestor process is that flock): the
 * machine is the soak's already, though the lock file exists.
 */
function underBenchLock(): boolean {
  let pid = process.ppid;
  for (let depth = 0; depth < 10 && pid > 1; depth++) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (path.basename(cmdline[0] ?? '') === 'flock' && cmdline.includes(BENCH_LOCK)) return true;
      pid = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
    } catch {
      return false;
    }
  }
  return false;
}

/** Waits while a benchmark holds the machine, then holds it for the soak. */
async function takeMachine(): Promise<void> {
  while (existsSync(BENCH_LOCK) && !underBenchLock()) {
    process.stdout.write(`waiting: ${BENCH_LOCK} exists (a benchmark is running)\n`);
    await delay(20_000);
  }
  await fs.writeFile(SOAK_LOCK, `${process.pid}\n`);
  cleanups.push(() => fs.rm(SOAK_LOCK, { force: true }));
}

async function createAccount(base: string, name: string): Promise<BenchAccount> {
  const account = await expectJson(201, `${base}/admin/accounts`, {
    method: 'POST',
    token: ADMIN,
    body: { name, plan: 'enterprise', rate_limit_per_minute: 1_000_000 },
  });
  const accountId = stringField(account, 'id');
  const key = await expectJson(201, `${base}/admin/accounts/${accountId}/api-keys`, {
    method: 'POST',
    token: ADMIN,
    body: {},
  });
  return { accountId, apiKey: stringField(key, 'api_key') };
}

async function main(): Promise<number> {
  if (!existsSync(path.join(ROOT, 'dist/cli.js'))) throw new Error('run "npm run build" first');
  await takeMachine();
  const origin = Date.now();
  const timeline: Soak['timeline'] = [];
  const log = (what: string) => {
    const atS = (Date.now() - origin) / 1000;
    timeline.push({ atS, what });
    process.stdout.write(`[${atS.toFixed(1).padStart(6)} s] ${what}\n`);
  };

  const dir = await tempDir();
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
  const pg = await PostgresCluster.start(dir);
  cleanups.push(() => pg.stop());
  const bouncer = await startPgBouncer(pg.url);
  cleanups.push(() => bouncer.stop());
  const redis = await Redis.start();
  cleanups.push(() => redis.down());
  const graph: FakeGraph = await startFakeGraph(ROOT, { keyed: true });
  cleanups.push(() => graph.stop());
  const receiver: WebhookReceiver = await startWebhookReceiver(ROOT);
  cleanups.push(() => receiver.stop());
  log(`PostgreSQL on ${pg.port}, PgBouncer ${new URL(bouncer.url).port}, Redis ${redis.port}`);

  const migrated = spawnSync(process.execPath, ['dist/cli.js', 'migrate'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: pg.url, SECRETS_KEY, LOG_LEVEL: 'warn' },
    encoding: 'utf8',
  });
  if (migrated.status !== 0) throw new Error(`migrate failed: ${migrated.stderr}`);

  const spreaderPort = await freePort();
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    DATABASE_URL: bouncer.url,
    DATABASE_DIRECT_URL: pg.url,
    REDIS_URL: redis.url,
    SECRETS_KEY,
    ADMIN_TOKEN: ADMIN,
    META_GRAPH_URL: graph.url,
    ALLOW_PRIVATE_TARGETS: 'true',
    NODE_EXTRA_CA_CERTS: path.join(ROOT, 'test/fixtures/tls/ca.pem'),
    PUBLIC_URL: `http://127.0.0.1:${spreaderPort}`,
    BROADCAST_RATE_WHATSAPP: BROADCAST_RATE,
  };
  const logDir = path.join(dir, 'logs');
  await fs.mkdir(logDir);
  const apis = [
    new ServiceProcess('api-1', 'api', await freePort(), env, logDir, ROOT),
    new ServiceProcess('api-2', 'api', await freePort(), env, logDir, ROOT),
  ];
  const workers = [
    new ServiceProcess('worker-1', 'worker', 0, env, logDir, ROOT),
    new ServiceProcess('worker-2', 'worker', 0, env, logDir, ROOT),
  ];
  const services = [...apis, ...workers];
  for (const s of services) {
    cleanups.push(() => s.stop());
    await s.start();
  }
  const spreader = new Spreader(apis.map((a) => a.port));
  await spreader.start(spreaderPort);
  cleanups.push(() => spreader.stop());
  const base = spreader.url;
  log(`2 API processes, 2 workers started; the spreader on ${spreaderPort}`);

  // The load account: sends, creates, inbound, reads, 50 streams, a webhook of every event.
  // The broadcast has an account of its own, so that its 100,000 message.created events go to
  // its webhook and not 50 times over to the streams.
  const service = { url: base } as ServiceHandle;
  const loadAccount = await createAccount(base, 'soak load');
  const castAccount = await createAccount(base, 'soak broadcast');
  for (const acc of [loadAccount, castAccount]) await approvedTemplate(service, acc);
  const channel = await connectWhatsApp(service, graph, loadAccount);
  await connectWhatsApp(service, graph, castAccount);
  for (const acc of [loadAccount, castAccount])
    await expectJson(201, `${base}/v1/webhooks`, {
      method: 'POST',
      token: acc.apiKey,
      body: { url: receiver.url, events: [...EVENT_TYPES] },
    });
  const pool = openPool(pg.url);
  cleanups.push(() => pool.end());
  const contactIds = await insertTaggedContacts(pool, {
    accountId: loadAccount.accountId,
    tag: 'soak-load',
    count: 200,
    area: 212,
    namePrefix: 'Soak Load',
  });
  await insertTaggedContacts(pool, {
    accountId: castAccount.accountId,
    tag: 'soak-audience',
    count: RECIPIENTS,
    area: 718,
    namePrefix: 'Soak Audience',
  });
  const accounts = [loadAccount.accountId, castAccount.accountId];
  const before = new Set(
    (
      await pool.query<{ id: string }>('SELECT id FROM events WHERE account_id = ANY($1)', [
        accounts,
      ])
    ).rows.map((r) => r.id),
  );
  const streams = await openStreams(base, loadAccount.apiKey, STREAMS);
  cleanups.push(() => streams.forEach((s) => s.close()));
  log(
    `accounts ready: ${RECIPIENTS.toLocaleString('en')} audience contacts; ${STREAMS} streams open`,
  );

  // Memory of every service process, each run of it apart.
  const rss: Soak['rss'] = {};
  const sampleRss = async () => {
    for (const s of services) {
      const pid = s.pid;
      const bytes = pid === null ? null : await readRssBytes(pid);
      if (bytes === null) continue;
      const name = s.generation > 1 ? `${s.name} (run ${s.generation})` : s.name;
      (rss[name] ??= []).push({ atS: (Date.now() - origin) / 1000, mib: bytes / 2 ** 20 });
    }
  };
  await sampleRss();
  const sampler = setInterval(() => void sampleRss(), RSS_EVERY_MS);
  cleanups.push(() => clearInterval(sampler));

  const load = new MixedLoad({
    baseUrl: base,
    apiKey: loadAccount.apiKey,
    channel,
    templateName: BENCH_TEMPLATE.name,
    contactIds,
    origin,
  });
  const loadStart = Date.now();
  load.start({
    'list contacts': 4,
    'list conversations': 4,
    'create contact': 2,
    send: 3,
    inbound: 3,
  });
  log('load started');
  const at = async (seconds: number) => {
    const wait = loadStart + seconds * MINUTES * 100 - Date.now();
    if (wait > 0) await delay(wait);
  };
  const faults: Soak['faults'] = [];
  const restarts: Promise<void>[] = [];

  await at(60);
  const broadcast = await createTemplateBroadcast(base, castAccount.apiKey, {
    name: 'Soak broadcast',
    tag: 'soak-audience',
    code: 'soak-broadcast',
  });
  const broadcastId = stringField(broadcast, 'id');
  log(`broadcast ${broadcastId} created (${RECIPIENTS.toLocaleString('en')} recipients)`);

  await at(75);
  // Killed while the broadcast is sending: once it has sent some, before it is done.
  for (let i = 0; i < 120; i++) {
    const state = await expectJson(200, `${base}/v1/broadcasts/${broadcastId}`, {
      token: castAccount.apiKey,
    });
    const sent = Number((state.stats as { sent?: number } | undefined)?.sent ?? 0);
    if (state.status !== 'sending' || sent > 0) {
      log(`broadcast ${String(state.status)}, ${sent.toLocaleString('en')} sent`);
      break;
    }
    await delay(500);
  }
  await kill(workers[0]!, log, faults, origin, restarts);

  await at(240);
  await kill(apis[0]!, log, faults, origin, restarts);

  await at(300);
  let start = Date.now();
  log('PostgreSQL: pg_ctl restart -m fast');
  pg.restart();
  log(`PostgreSQL accepting connections again (${((Date.now() - start) / 1000).toFixed(1)} s)`);
  faults.push({
    what: 'PostgreSQL restart',
    fromS: (start - origin) / 1000,
    toS: (Date.now() - origin) / 1000,
  });

  await at(390);
  start = Date.now();
  await redis.down();
  log('Redis stopped');
  await delay(Math.max(10_000, 30_000 * (MINUTES / 10)));
  await redis.up();
  log('Redis started again');
  faults.push({
    what: 'Redis stopped',
    fromS: (start - origin) / 1000,
    toS: (Date.now() - origin) / 1000,
  });

  await at(600);
  await Promise.all(restarts);
  await load.stop();
  log('load stopped; waiting for the broadcast, the jobs and the deliveries to finish');
  clearInterval(sampler);
  return checkAndReport({
    origin,
    minutes: MINUTES,
    recipients: RECIPIENTS,
    broadcastRate: BROADCAST_RATE,
    base,
    pool,
    graph,
    receiver,
    streams,
    load,
    loadAccount,
    castAccount,
    broadcastId,
    eventsBefore: before,
    timeline,
    faults,
    rss,
    log,
  });
}

/**
 * kill -9, then the same process started again in the background (the timeline goes on while
 * it starts); the fault lasts until it is ready. Resolves at once; `restarted` when it is back.
 */
function kill(
  s: ServiceProcess,
  log: (what: string) => void,
  faults: Soak['faults'],
  origin: number,
  restarts: Promise<void>[],
): Promise<void> {
  const start = Date.now();
  const pid = s.pid;
  const restarted = (async () => {
    await s.kill();
    log(`${s.name} killed (kill -9, pid ${pid ?? '?'})`);
    await delay(2_000);
    await s.start();
    log(`${s.name} started again`);
    faults.push({
      what: `${s.name} kill -9`,
      fromS: (start - origin) / 1000,
      toS: (Date.now() - origin) / 1000,
    });
  })();
  restarts.push(restarted);
  return delay(100);
}

// Stopped from outside (Ctrl-C, `timeout`, a closed terminal): everything it started is stopped
// first, PostgreSQL above all, which pg_ctl runs apart from this process. The output may be
// gone by then (npm's pipe closed with npm): writing to it must not end the cleanup.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
  ['SIGHUP', 129],
] as const)
  process.on(signal, () => void cleanUp().finally(() => process.exit(code)));

main()
  .then(async (code) => {
    await cleanUp();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    process.stderr.write(
      `soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    await cleanUp();
    process.exit(1);
  });
