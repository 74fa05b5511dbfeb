import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_SECRETS_ENV } from '../secrets-key.js';
import { builtAt, newestSource } from '../sources.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let entry: string[] | undefined;

/**
 * How to run the CLI: the build (`dist/cli.js`, what `npm start` and the `switchboard` bin run)
 * when it is newer than every source file, as after `npm run build` (CI builds before it
 * tests); otherwise `src/cli.ts` under tsx, so that a test never runs a stale build. The build
 * starts in about half the time, with nothing to transform.
 */
function cliEntry(): string[] {
  entry ??=
    builtAt(path.join(ROOT, 'dist/cli.js')) >= newestSource(path.join(ROOT, 'src'))
      ? ['dist/cli.js']
      : ['--import', 'tsx', 'src/cli.ts'];
  return entry;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface ServiceProcess {
  child: ChildProcess;
  port: number;
  base: string;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or signal) once the process has ended. */
  exited: Promise<Exit>;
}

type Exit = { code: number | null; signal: NodeJS.Signals | null };

/**
 * The CLI with `args` (see cliEntry), its output collected. On a DATABASE_URL it gets the tests'
 * SECRETS_KEY unless `env` names one (an empty one included).
 */
export function spawnCli(env: Record<string, string>, args: string[]) {
  const child = spawn(process.execPath, [...cliEntry(), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...(env.DATABASE_URL ? TEST_SECRETS_ENV : {}), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<Exit>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Polls `ready` for up to 90 s while `p` runs; kills it and throws with its output if never. */
async function waitUntilReady(
  p: ServiceProcess,
  ready: () => boolean | Promise<boolean>,
  failure: string,
): Promise<ServiceProcess> {
  const deadline = Date.now() + 90_000;
  let ended = false;
  void p.exited.then(() => (ended = true));
  while (Date.now() < deadline && !ended) {
    if (await ready()) return p;
    await new Promise((r) => setTimeout(r, 200));
  }
  p.child.kill('SIGKILL');
  throw new Error(`${failure}:\n${p.stdout()}\n${p.stderr()}`);
}

/** Starts the service (see cliEntry) and waits for /readyz. */
export async function startService(
  env: Record<string, string>,
  args: string[] = [],
): Promise<ServiceProcess> {
  const port = Number(env.PORT ?? (await freePort()));
  const base = `http://127.0.0.1:${port}`;
  const service = {
    ...spawnCli({ LOG_LEVEL: 'warn', HOST: '127.0.0.1', ...env, PORT: String(port) }, args),
    port,
    base,
  };
  return waitUntilReady(
    service,
    async () => {
      try {
        return (await fetch(`${base}/readyz`)).ok;
      } catch {
        return false; // not listening yet
      }
    },
    'service did not become ready',
  );
}

/**
 * Starts the worker role (`switchboard worker`). It has no HTTP port (`port` 0,
 * `base` empty): it is ready once it logs that it started, so it logs at info.
 */
export async function startWorker(env: Record<string, string>): Promise<ServiceProcess> {
  const worker = { ...spawnCli({ ...env, LOG_LEVEL: 'info' }, ['worker']), port: 0, base: '' };
  return waitUntilReady(
    worker,
    () => worker.stdout().includes('switchboard started'),
    'worker did not start',
  );
}

/** Stops a started process with SIGTERM, as an operator would, and SIGKILL after 15 s. */
export async function stopProcess(p: ServiceProcess): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill('SIGTERM');
  const force = setTimeout(() => p.child.kill('SIGKILL'), 15_000);
  await p.exited;
  clearTimeout(force);
}

/** Runs the CLI to completion and returns its exit code and output. */
export async function runCli(env: Record<string, string>, args: string[] = []) {
  const run = spawnCli({ LOG_LEVEL: 'warn', ...env }, args);
  const { code } = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}
