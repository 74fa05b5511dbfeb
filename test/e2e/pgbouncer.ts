import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './process.js';

/** Debian's PgBouncer, where the `pgbouncer` package puts it; null when it is not installed. */
export function pgbouncerBinary(): string | null {
  for (const candidate of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
    if (spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  return null;
}

export interface Bouncer {
  /** DATABASE_URL through the pooler (any user name: it logs in as the backend's). */
  url: string;
  log(): string;
  stop(): Promise<void>;
}

/**
 * A PgBouncer in transaction pooling mode on a spare port, in front of the database at
 * `backendUrl`, with `poolSize` server connections at most: every transaction of every client
 * may run on another one. Run as `nobody` when started as root (PgBouncer refuses root).
 * `settings` adds to (or overrides) the `[pgbouncer]` section, e.g. `server_login_retry`.
 */
export async function startBouncer(
  binary: string,
  backendUrl: string,
  poolSize = 4,
  settings: Record<string, string | number> = {},
): Promise<Bouncer> {
  const backend = new URL(backendUrl);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sb-pgbouncer-'));
  await chmod(dir, 0o755);
  const port = await freePort();
  const target = [
    `host=${backend.hostname}`,
    `port=${backend.port || '5432'}`,
    `dbname=${decodeURIComponent(backend.pathname.slice(1))}`,
    `user=${decodeURIComponent(backend.username)}`,
    ...(backend.password ? [`password=${decodeURIComponent(backend.password)}`] : []),
  ].join(' ');
  const ini = path.join(dir, 'pgbouncer.ini');
  await writeFile(
    ini,
    [
      '[databases]',
      `switchboard = ${target}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 1000',
      'logfile =',
      'pidfile =',
      'ignore_startup_parameters = extra_float_digits',
      ...Object.entries(settings).map(([name, value]) => `${name} = ${value}`),
      '',
    ].join('\n'),
  );
  await chmod(ini, 0o644);
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(binary, [...(asRoot ? ['-u', 'nobody'] : []), ini], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  for (let i = 0; i < 100 && !out.includes('process up'); i++) {
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!out.includes('process up')) {
    child.kill('SIGKILL');
    throw new Error(`pgbouncer did not start:\n${out}`);
  }
  return {
    url: `postgres://switchboard@127.0.0.1:${port}/switchboard`,
    log: () => out,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGINT');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
