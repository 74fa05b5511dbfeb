import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Binaries } from './binaries.js';
import { ensureOwnedBy, type RunAs } from './run-as.js';
import { waitForPidExit } from './processes.js';
import { delay, parsePid, readIfExists } from './util.js';

// The server's lifecycle goes through pg_ctl, PostgreSQL's own tool for it: `start -w` starts
// the postmaster in its own session (so a terminal's Ctrl-C reaches only Node, which drains
// requests and then stops the server itself) and waits until it accepts connections;
// `stop -m fast` ends sessions and writes a shutdown checkpoint, so the next start needs no WAL
// recovery; `status` tells whether the directory's server runs. There is no exit hook: if Node
// is SIGKILLed the server lives on, and the next start's crash recovery stops it.

const READY_TIMEOUT_S = 60;
const STOP_TIMEOUT_S = 30;
const START_ATTEMPTS = 5;

/** How a cluster's server is run: its binaries, its directory, and as whom. */
export interface Cluster {
  bin: Binaries;
  pgDir: string;
  runAs: RunAs;
  /** The server's log (pg_ctl -l); read back to explain a failed start. */
  logFile: string;
  /** Added to startup errors: why the postgres user may not reach the directory. */
  hint: string;
}

export interface ServerOptions {
  port: number;
  /** Where the Unix socket goes; null for TCP only. */
  socketDir: string | null;
}

export class ProgramFailed extends Error {
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly output: string,
  ) {
    super(message);
  }
}

/** Runs one of PostgreSQL's programs (as the postgres user when we are root) to completion. */
export async function runProgram(
  file: string,
  args: string[],
  runAs: RunAs,
  timeoutMs = 0,
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      {
        ...runAs,
        // The postgres user may not be able to enter our working directory.
        cwd: path.parse(process.cwd()).root,
        // We match some server messages (port clashes), so they must not be translated.
        env: { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' },
        windowsHide: true,
        timeout: timeoutMs,
      },
      (err, stdout, stderr) => {
        const output = `${stdout}${stderr}`.trim();
        if (!err) return resolve(output);
        const code = typeof err.code === 'number' ? err.code : null;
        reject(
          new ProgramFailed(
            `${path.basename(file)} ${args[0] ?? ''} failed (${code === null ? err.message : `code ${code}`}): ${output}`,
            code,
            output,
          ),
        );
      },
    );
  });
}

const TRANSIENT_START_FAILURE =
  /could not bind|Address already in use|could not create any TCP\/IP sockets|pre-existing shared memory block .* is still in use/i;

/**
 * Starts the server and resolves once it accepts connections. A port taken between our check
 * and the server's bind, or shared memory still held by a killed leftover's backends, goes away
 * on retry (with a new port from `choosePort`).
 */
export async function startServer(
  cluster: Cluster,
  socketDir: string | null,
  choosePort: () => Promise<number>,
  log: (line: string) => void,
): Promise<number> {
  await rotateLog(cluster);
  for (let attempt = 1; ; attempt++) {
    const port = await choosePort();
    try {
      await startOnPort(cluster, { port, socketDir });
      return port;
    } catch (err) {
      const transient = err instanceof StartFailed && TRANSIENT_START_FAILURE.test(err.serverLog);
      if (!transient || attempt >= START_ATTEMPTS) throw err;
      log(`embedded-postgres: retrying start (${err.message.split('\n')[0] ?? ''})`);
      await delay(250 * attempt);
    }
  }
}

class StartFailed extends Error {
  constructor(
    message: string,
    readonly serverLog: string,
  ) {
    super(message);
  }
}

/** `pg_ctl start -w` on a given port; the server's own log lines explain a failure. */
export async function startOnPort(cluster: Cluster, opts: ServerOptions): Promise<void> {
  const logStart = (await fs.stat(cluster.logFile).catch(() => undefined))?.size ?? 0;
  const serverArgs = [
    '-p',
    String(opts.port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `unix_socket_directories=${opts.socketDir ?? ''}`,
    '-c',
    'max_connections=200',
    '-c',
    'fsync=on',
    // A new WAL segment is otherwise written full of zeros (16 MB, then fsync) by the backend
    // that first needs it, while every commit waits: until checkpoints recycle old segments,
    // a busy new store stalled every commit for about 40 ms each 16 MB of WAL (every 2 s at
    // 2,500 sends a second). Unfilled, the segment is allocated as it is written. What the
    // filling guards against, running out of disk while writing WAL, stops the server
    // either way (a WAL write that fails is a PANIC, and it restarts from its WAL).
    '-c',
    'wal_init_zero=off',
  ];
  try {
    await runProgram(
      cluster.bin.pg_ctl,
      [
        'start',
        '-D',
        cluster.pgDir,
        '-w',
        '-t',
        String(READY_TIMEOUT_S),
        '-s',
        '-l',
        cluster.logFile,
        // pg_ctl hands these to a shell (cmd on Windows) on the postgres command line.
        '-o',
        serverArgs.map(shellQuote).join(' '),
      ],
      cluster.runAs,
    );
  } catch (err) {
    // pg_ctl gives up waiting after its timeout but leaves a slow server running.
    if ((await serverStatus(cluster)) === 'running') await stopServer(cluster, 'immediate');
    const serverLog = await readFrom(cluster.logFile, logStart);
    throw new StartFailed(
      `PostgreSQL did not start: ${err instanceof Error ? err.message : String(err)}\n${serverLog}${cluster.hint}`,
      serverLog,
    );
  }
}

/** Whether the directory's server runs, as pg_ctl sees it from postmaster.pid. */
export async function serverStatus(cluster: Cluster): Promise<'running' | 'stopped'> {
  try {
    await runProgram(cluster.bin.pg_ctl, ['status', '-D', cluster.pgDir], cluster.runAs);
    return 'running';
  } catch (err) {
    // 3: not running; 4: no accessible data directory. Anything else is a real failure.
    if (err instanceof ProgramFailed && (err.exitCode === 3 || err.exitCode === 4)) {
      return 'stopped';
    }
    throw err;
  }
}

/**
 * Stops the server and waits until it is gone. A fast shutdown that does not finish in time
 * becomes an immediate one (no checkpoint: the next start replays the WAL, losing nothing).
 */
export async function stopServer(
  cluster: Cluster,
  mode: 'fast' | 'immediate' = 'fast',
): Promise<void> {
  if ((await serverStatus(cluster)) === 'stopped') return;
  const pid = parsePid(await readIfExists(path.join(cluster.pgDir, 'postmaster.pid')));
  const stop = (m: string, timeoutS: number) =>
    runProgram(
      cluster.bin.pg_ctl,
      ['stop', '-D', cluster.pgDir, '-m', m, '-w', '-t', String(timeoutS), '-s'],
      cluster.runAs,
    );
  try {
    await stop(mode, STOP_TIMEOUT_S);
  } catch (err) {
    if ((await serverStatus(cluster)) !== 'stopped') {
      if (mode === 'immediate') throw err;
      await stop('immediate', 10);
    }
  }
  // pg_ctl returns once postmaster.pid is gone, which the postmaster removes just before it
  // exits; callers (and a next start's shared memory check) want the process itself gone.
  if (pid !== undefined) await waitForPidExit(pid, 5_000);
}

/** Keeps the previous run's log as `<log>.1`; the server appends to a fresh one. */
async function rotateLog(cluster: Cluster): Promise<void> {
  await fs.rename(cluster.logFile, `${cluster.logFile}.1`).catch(() => undefined);
  // The shell that pg_ctl starts opens the log as the postgres user, who cannot create files
  // in a data directory owned by root.
  await fs.writeFile(cluster.logFile, '', { mode: 0o640 });
  await ensureOwnedBy(cluster.logFile, cluster.runAs);
}

async function readFrom(file: string, offset: number): Promise<string> {
  const content = await fs.readFile(file).catch(() => Buffer.alloc(0));
  return content.subarray(offset).toString('utf8').trim().split('\n').slice(-50).join('\n');
}

function shellQuote(arg: string): string {
  if (process.platform === 'win32') return `"${arg.replace(/"/g, '""')}"`;
  return /^[\w./=:,-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}
