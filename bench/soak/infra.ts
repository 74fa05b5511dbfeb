/**
 * What the soak test runs on, all started by it on spare ports and stopped by it: a PostgreSQL
 * cluster in a temp dir (Debian's server binaries), PgBouncer in transaction mode in front of
 * it, a Redis, the service's processes (`serve --no-workers` and `worker`) and a load spreader.
 * Nothing here touches the machine's own PostgreSQL or Redis.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, readdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pgbouncerBinary, startBouncer, type Bouncer } from '../../test/e2e/pgbouncer.js';
import { delay, exited, freePort, hasExited } from '../lib/child.js';

/** Debian's PostgreSQL server binaries, the newest installed. */
function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const found = versions
    .map((v) => path.join(root, v, 'bin'))
    .find((d) => existsSync(`${d}/initdb`));
  if (!found) throw new Error(`no PostgreSQL server binaries under ${root}`);
  return found;
}

/** Runs as `postgres` when we are root (the server refuses root). */
function asPostgres(cmd: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0
    ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]]
    : [cmd, args];
}

function run(cmd: string, args: string[]): void {
  const [c, a] = asPostgres(cmd, args);
  const result = spawnSync(c, a, { encoding: 'utf8' });
  if (result.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed:\n${result.stdout}\n${result.stderr}`);
}

/** A PostgreSQL cluster of the soak's own, in `dir/pg`, on a spare port. */
export class PostgresCluster {
  readonly url: string;
  private readonly bin = postgresBin();
  private readonly data: string;

  private constructor(
    private readonly dir: string,
    readonly port: number,
  ) {
    this.data = path.join(dir, 'pg');
    this.url = `postgres://postgres@127.0.0.1:${port}/switchboard`;
  }

  static async start(dir: string): Promise<PostgresCluster> {
    const cluster = new PostgresCluster(dir, await freePort());
    if (process.getuid?.() === 0) {
      const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
      const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
      await fs.chown(dir, uid, gid);
    }
    run(`${cluster.bin}/initdb`, [
      '-D',
      cluster.data,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
    ]);
    cluster.pgCtl('start');
    run(`${cluster.bin}/createdb`, [
      '-h',
      '127.0.0.1',
      '-p',
      String(cluster.port),
      '-U',
      'postgres',
      'switchboard',
    ]);
    return cluster;
  }

  private pgCtl(action: 'start' | 'restart' | 'stop', mode = 'fast'): void {
    // fsync off: a clean restart (-m fast) loses nothing, and the disk is shared with others.
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off`;
    run(`${this.bin}/pg_ctl`, [
      '-D',
      this.data,
      '-l',
      path.join(this.dir, 'postgres.log'),
      '-w',
      '-t',
      '60',
      ...(action === 'start' ? [] : ['-m', mode]),
      ...(action === 'stop' ? [] : ['-o', options]),
      action,
    ]);
  }

  /** `pg_ctl restart -m fast`: every session is ended, the server back once it accepts connections. */
  restart(): void {
    this.pgCtl('restart');
  }

  /** The postmaster's pid (from postmaster.pid). */
  async pid(): Promise<number | null> {
    try {
      return Number(
        (await fs.readFile(path.join(this.data, 'postmaster.pid'), 'utf8')).split('\n')[0],
      );
    } catch {
      return null;
    }
  }

  stop(): void {
    if (existsSync(path.join(this.data, 'postmaster.pid'))) this.pgCtl('stop', 'immediate');
  }
}

export async function startPgBouncer(backendUrl: string): Promise<Bouncer> {
  const binary = pgbouncerBinary();
  if (!binary) throw new Error('PgBouncer is not installed (/usr/sbin/pgbouncer)');
  // After a PostgreSQL restart it logs in again within a second, rather than 15 s later.
  return startBouncer(binary, backendUrl, 20, { server_login_retry: 1, query_wait_timeout: 30 });
}

/** A Redis of the soak's own, without persistence, that can be stopped and started again. */
export class Redis {
  private child: ChildProcess | null = null;
  readonly url: string;

  private constructor(readonly port: number) {
    this.url = `redis://127.0.0.1:${port}`;
  }

  static async start(): Promise<Redis> {
    const redis = new Redis(await freePort());
    await redis.up();
    return redis;
  }

  async up(): Promise<void> {
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'ignore', 'ignore'] },
    );
    this.child = child;
    for (let i = 0; i < 100; i++) {
      if (await portOpen(this.port)) return;
      if (hasExited(child)) break;
      await delay(50);
    }
    throw new Error(`redis-server did not start on port ${this.port}`);
  }

  pid(): number | null {
    return this.child?.pid ?? null;
  }

  async down(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || hasExited(child)) return;
    child.kill('SIGTERM');
    await exited(child);
  }
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** One of the service's processes; `start` again after a kill runs a new one (same port). */
export class ServiceProcess {
  private child: ChildProcess | null = null;
  /** How many processes ran under this name (1 at first). */
  generation = 0;

  constructor(
    readonly name: string,
    readonly role: 'api' | 'worker',
    readonly port: number,
    private readonly env: Record<string, string>,
    private readonly logDir: string,
    private readonly root: string,
  ) {}

  get pid(): number | null {
    return this.child && !hasExited(this.child) ? (this.child.pid ?? null) : null;
  }

  async start(): Promise<void> {
    this.generation++;
    const log = createWriteStream(path.join(this.logDir, `${this.name}.${this.generation}.log`));
    let out = '';
    const child = spawn(
      process.execPath,
      ['dist/cli.js', ...(this.role === 'api' ? ['serve', '--no-workers'] : ['worker'])],
      {
        cwd: this.root,
        env: {
          ...process.env,
          ...this.env,
          PORT: String(this.port),
          LOG_LEVEL: this.role === 'worker' ? 'info' : 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (c: Buffer) => {
        if (out.length < 100_000) out += c.toString();
        log.write(c);
      });
    }
    child.once('exit', () => log.end());
    this.child = child;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (hasExited(child)) break;
      if (this.role === 'worker' ? out.includes('switchboard started') : await this.ready()) return;
      await delay(200);
    }
    child.kill('SIGKILL');
    throw new Error(`${this.name} did not start:\n${out.slice(-3000)}`);
  }

  private async ready(): Promise<boolean> {
    try {
      return (await fetch(`http://127.0.0.1:${this.port}/readyz`)).ok;
    } catch {
      return false;
    }
  }

  /** kill -9. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || hasExited(child)) return;
    child.kill('SIGKILL');
    await exited(child);
  }

  /** SIGTERM as an operator would, SIGKILL after 20 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || hasExited(child)) return;
    child.kill('SIGTERM');
    const force = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited(child);
    clearTimeout(force);
  }
}

/**
 * The load spreader: a TCP proxy on a spare port that hands each new connection to the next
 * backend in turn, skipping one that refuses (for a second, then it is tried again). A
 * backend's connection that breaks breaks its client's too: a killed process cuts what it held.
 */
export class Spreader {
  private server: net.Server | null = null;
  private next = 0;
  private readonly downUntil = new Map<number, number>();
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly backends: number[]) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(port: number): Promise<void> {
    const server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = port;
    this.server = server;
  }

  private accept(client: net.Socket): void {
    client.pause();
    client.on('error', () => undefined);
    this.sockets.add(client);
    client.once('close', () => this.sockets.delete(client));
    const tryBackend = (tries: number) => {
      if (tries >= this.backends.length * 2 || client.destroyed) return client.destroy();
      const now = Date.now();
      const port = this.backends[this.next++ % this.backends.length]!;
      if ((this.downUntil.get(port) ?? 0) > now && tries < this.backends.length)
        return tryBackend(tries + 1);
      const upstream = net.connect(port, '127.0.0.1');
      let connected = false;
      upstream.on('error', () => {
        if (connected) return; // 'close' follows and ends the client
        this.downUntil.set(port, Date.now() + 1_000);
        upstream.destroy();
        tryBackend(tries + 1);
      });
      upstream.once('connect', () => {
        connected = true;
        this.downUntil.delete(port);
        this.sockets.add(upstream);
        upstream.once('close', () => {
          this.sockets.delete(upstream);
          client.destroy();
        });
        client.once('close', () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    tryBackend(0);
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

export async function tempDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'switchboard-soak-'));
  await fs.chmod(dir, 0o755);
  return dir;
}
