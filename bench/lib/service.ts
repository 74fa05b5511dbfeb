import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  OutputTail,
  delay,
  errMessage,
  exited,
  freePort,
  hasExited,
  settlesWithin,
  stopChild,
} from './child.js';
import { expectJson, stringField } from './http.js';
import { benchSecretsKey, redactUrl } from './settings.js';

/** The built service (`node dist/main.js`) running as a child process on 127.0.0.1. */
export interface ServiceHandle {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Which database it runs on, for the report. */
  database: string;
  /** The service's process id (to sample its memory). */
  pid: number;
  /** The extra environment it was started with (beyond what the harness always sets). */
  extraEnv: Readonly<Record<string, string>>;
  /**
   * A `postgres://` URL of the service's database, for suites that seed rows directly: the
   * BENCH_DATABASE_URL, or the embedded server's (from DATA_DIR/pg-credentials.json and the
   * port in DATA_DIR/pg/postmaster.pid). 127.0.0.1 only.
   */
  databaseUrl(): Promise<string>;
  /** A fresh Enterprise account (rate limit 1,000,000/min) with one API key, via the admin API. */
  createAccount(name: string): Promise<BenchAccount>;
  /**
   * Starts a `switchboard worker` process on the service's database with its settings (for a
   * service started API-only); stopped with the service, or earlier by its `stop`.
   */
  startWorker(): Promise<{ pid: number; stop(): Promise<void> }>;
  /** SIGTERM (SIGKILL after a grace period), then removes the temp DATA_DIR. Idempotent. */
  stop(): Promise<void>;
}

export interface BenchAccount {
  accountId: string;
  apiKey: string;
}

const READY_TIMEOUT_MS = 180_000; // the first start on an embedded store runs initdb
const READY_POLL_MS = 250;
const START_ATTEMPTS = 3;
// The service forces its own exit 30 s after SIGTERM; a little more before we SIGKILL.
const STOP_GRACE_MS = 40_000;
const ECHO_MAX_LINES = 20;
export const BENCH_RATE_LIMIT = 1_000_000;

// Settings the harness decides; anything inherited under these names is dropped. REDIS_URL
// too: the rate limiter stays in memory so that runs are comparable.
const OWNED_ENV = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'DATABASE_URL',
  'REDIS_URL',
  'ADMIN_TOKEN',
  'LOG_LEVEL',
];

/**
 * Extra Node.js flags for the service process only (BENCH_SERVICE_NODE_ARGS, split on spaces),
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it while a suite runs; the profile is
 * written when the service exits at the end of the suite.
 */
function serviceNodeArgs(): string[] {
  return (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
}

/**
 * Every line the service and its workers print, appended to the file BENCH_SERVICE_OUTPUT names
 * (with the process's role and the time in ms since the epoch), API keys masked: what flags such
 * as `--trace-gc` print, to set beside a run's latency trace. Nothing when unset.
 */
function outputFile(): (role: string, line: string) => void {
  const file = process.env.BENCH_SERVICE_OUTPUT;
  if (!file) return () => {};
  return (role, line) =>
    appendFileSync(file, `${Date.now()} ${role} ${line.replace(/sb_live_[\w-]+/g, 'sb_live_…')}\n`);
}

export async function startService(opts: {
  projectRoot: string;
  databaseUrl: string | null;
  log: (line: string) => void;
  /** Extra service settings (SANDBOX_AUTO_ADVANCE, ALLOW_PRIVATE_TARGETS, NODE_EXTRA_CA_CERTS…). */
  extraEnv?: Readonly<Record<string, string>>;
  /** `dist/cli.js serve --no-workers` rather than `dist/main.js` (needs a database URL). */
  apiOnly?: boolean;
}): Promise<ServiceHandle> {
  const extraEnv = { ...opts.extraEnv };
  const owned = Object.keys(extraEnv).filter((name) => OWNED_ENV.includes(name));
  if (owned.length > 0) throw new Error(`the harness sets ${owned.join(', ')} itself`);
  const mainJs = path.join(opts.projectRoot, 'dist', 'main.js');
  if (!existsSync(mainJs)) throw new Error(`${mainJs} not found: run "npm run build" first`);
  const cliJs = path.join(opts.projectRoot, 'dist', 'cli.js');
  if (opts.apiOnly === true && opts.databaseUrl === null) {
    throw new Error('an API-only service needs BENCH_DATABASE_URL, for its workers to share');
  }
  const serviceArgs = opts.apiOnly === true ? [cliJs, 'serve', '--no-workers'] : [mainJs];

  let dataDir: string | null = null;
  if (opts.databaseUrl === null) {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-'));
    // Run as root, the service starts PostgreSQL as the postgres user, which must enter it.
    await fs.chmod(dataDir, 0o755);
  }
  const adminToken = randomBytes(24).toString('hex');
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of OWNED_ENV) delete env[name];
  Object.assign(env, { HOST: '127.0.0.1', ADMIN_TOKEN: adminToken, LOG_LEVEL: 'warn' });
  if (opts.databaseUrl !== null) {
    env.DATABASE_URL = opts.databaseUrl;
    env.SECRETS_KEY = benchSecretsKey(env);
  }
  if (dataDir !== null) env.DATA_DIR = dataDir;
  Object.assign(env, extraEnv);

  let child: ChildProcess | undefined;
  const workers: ChildProcess[] = [];
  const keep = outputFile();
  const cleanup = async () => {
    await Promise.all(workers.map((w) => stopChild(w, STOP_GRACE_MS)));
    if (child) await stopChild(child, STOP_GRACE_MS);
    if (dataDir !== null) {
      await stopLeftoverPostgres(dataDir, opts.log);
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  };

  try {
    let url = '';
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      url = `http://127.0.0.1:${port}`;
      const tail = new OutputTail();
      let echoed = 0;
      const echo = (line: string) => {
        keep('service', line);
        // Only warnings and errors are logged (LOG_LEVEL=warn); the first few are shown.
        // stdout also carries the Default account's API key on a new store: never echoed.
        if (!line.startsWith('{')) return;
        if (echoed < ECHO_MAX_LINES) opts.log(`[service] ${line}`);
        else if (echoed === ECHO_MAX_LINES) opts.log('[service] (further log lines not shown)');
        echoed++;
      };
      child = spawn(process.execPath, [...serviceNodeArgs(), ...serviceArgs], {
        cwd: opts.projectRoot,
        env: { ...env, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      tail.follow(child.stdout, echo);
      tail.follow(child.stderr, echo);
      const spawnFailed = new Promise<Error>((resolve) => child?.once('error', resolve));
      const outcome = await Promise.race([waitReady(url, child), spawnFailed]);
      if (outcome === 'ready') break;
      if (outcome instanceof Error) throw outcome;
      const output = tail.toString();
      if (/EADDRINUSE/.test(output) && attempt < START_ATTEMPTS) {
        opts.log(`port ${port} was taken; retrying`);
        continue;
      }
      await stopChild(child, STOP_GRACE_MS);
      throw new Error(
        outcome === 'exited'
          ? `the service exited during startup (code ${child.exitCode ?? 'null'}):\n${output}`
          : `the service was not ready within ${READY_TIMEOUT_MS / 1000} s:\n${output}`,
      );
    }

    let stopping: Promise<void> | undefined;
    const serviceUrl = url;
    const pid = child?.pid;
    if (pid === undefined) throw new Error('the service has no pid');
    const externalUrl = opts.databaseUrl;
    const embeddedDir = dataDir;
    return {
      url: serviceUrl,
      database:
        opts.databaseUrl === null
          ? `embedded PostgreSQL (fresh temp DATA_DIR ${dataDir ?? ''})`
          : `${redactUrl(opts.databaseUrl)} (BENCH_DATABASE_URL)`,
      pid,
      extraEnv,
      databaseUrl: async () => externalUrl ?? embeddedDatabaseUrl(embeddedDir ?? 'no DATA_DIR'),
      createAccount: async (name) => {
        const account = await expectJson(201, `${serviceUrl}/admin/accounts`, {
          method: 'POST',
          token: adminToken,
          body: { name, plan: 'enterprise', rate_limit_per_minute: BENCH_RATE_LIMIT },
        });
        const accountId = stringField(account, 'id');
        const key = await expectJson(201, `${serviceUrl}/admin/accounts/${accountId}/api-keys`, {
          method: 'POST',
          token: adminToken,
          body: {},
        });
        return { accountId, apiKey: stringField(key, 'api_key') };
      },
      startWorker: async () => {
        const worker = spawn(process.execPath, [...serviceNodeArgs(), cliJs, 'worker'], {
          cwd: opts.projectRoot,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const tail = new OutputTail();
        tail.follow(worker.stdout, (line) => {
          keep('worker', line);
          if (line.startsWith('{')) opts.log(`[worker] ${line}`);
        });
        tail.follow(worker.stderr, (line) => {
          keep('worker', line);
          opts.log(`[worker] ${line}`);
        });
        workers.push(worker);
        const workerPid = worker.pid;
        if (workerPid === undefined) throw new Error('the worker has no pid');
        return {
          pid: workerPid,
          stop: async () => void (await stopChild(worker, STOP_GRACE_MS)),
        };
      },
      stop: () => (stopping ??= cleanup()),
    };
  } catch (err) {
    await cleanup().catch((cleanupErr: unknown) =>
      opts.log(`cleanup after a failed start also failed: ${errMessage(cleanupErr)}`),
    );
    throw err;
  }
}

/**
 * The URL of the service's embedded PostgreSQL (see src/db/embedded/): the
 * credentials it generated and the port its running postmaster records; database `switchboard`.
 */
async function embeddedDatabaseUrl(dataDir: string): Promise<string> {
  const credentials = JSON.parse(
    await fs.readFile(path.join(dataDir, 'pg-credentials.json'), 'utf8'),
  ) as { user?: unknown; password?: unknown };
  // postmaster.pid: pid, data directory, start time, port, … one per line.
  const pidFile = await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8');
  const port = pidFile.split('\n')[3]?.trim() ?? '';
  if (typeof credentials.user !== 'string' || typeof credentials.password !== 'string') {
    throw new Error(`${dataDir}/pg-credentials.json has no user and password`);
  }
  if (!/^\d+$/.test(port)) throw new Error(`no port in ${dataDir}/pg/postmaster.pid`);
  return (
    `postgres://${encodeURIComponent(credentials.user)}:` +
    `${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/switchboard`
  );
}

/** 'ready' once GET /readyz answers 200; 'exited' if the child ends first; 'timeout'. */
async function waitReady(
  url: string,
  child: ChildProcess,
): Promise<'ready' | 'exited' | 'timeout'> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  const gone = exited(child);
  while (Date.now() < deadline) {
    if (hasExited(child)) return 'exited';
    try {
      const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status === 200) return 'ready';
    } catch {
      // not listening yet
    }
    await settlesWithin(gone, READY_POLL_MS);
  }
  return 'timeout';
}

/**
 * The service stops its embedded PostgreSQL on SIGTERM. Only if it had to be SIGKILLed does
 * the server outlive it (it is started detached); stop it then, before its directory goes.
 */
async function stopLeftoverPostgres(dataDir: string, log: (line: string) => void): Promise<void> {
  let content: string;
  try {
    content = await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8');
  } catch {
    return; // stopped cleanly: PostgreSQL removes its pid file
  }
  const first = content.split('\n')[0]?.trim() ?? '';
  if (!/^\d+$/.test(first) || Number(first) <= 1) return;
  const pid = Number(first);
  if (!isAlive(pid)) return;
  log(`stopping leftover embedded PostgreSQL (pid ${pid})`);
  process.kill(pid, 'SIGINT'); // fast shutdown
  for (let i = 0; i < 300 && isAlive(pid); i++) await delay(100);
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
