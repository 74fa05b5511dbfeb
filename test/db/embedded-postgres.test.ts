import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../src/db/embedded/index.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const fixture = fileURLToPath(new URL('./fixtures/hold-embedded-postgres.ts', import.meta.url));
const TIMEOUT = 120_000;

const dataDirs: string[] = [];
const children: ChildProcess[] = [];

async function makeDataDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'switchboard-epg-'));
  // When the tests run as root, PostgreSQL runs as the postgres user and must be able to
  // enter the directory; mkdtemp creates it 0700.
  await fs.chmod(dir, 0o755);
  dataDirs.push(dir);
  return dir;
}

/** Liveness as the kernel sees it; an unreaped zombie counts as gone. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) !== 'Z';
  } catch {
    return false;
  }
}

/** Postmasters (not their children, which rewrite their argv) started with `-D pgDir`. */
function postmastersFor(pgDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args[1] === '-D' && args[2] === pgDir && isAlive(Number(entry))) pids.push(Number(entry));
    } catch {
      // exited while we were looking
    }
  }
  return pids;
}

async function postmasterPid(pgDir: string): Promise<number> {
  const first = (await fs.readFile(path.join(pgDir, 'postmaster.pid'), 'utf8')).split('\n')[0];
  return Number(first);
}

function waitForExit(child: ChildProcess): Promise<{ code: number | null; signal: string | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Runs the fixture in its own Node process and resolves once its row is committed. */
async function startHolder(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, dataDir], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve({ child, url: (JSON.parse(line) as { url: string }).url });
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`fixture exited early (${code ?? signal}): ${stderr}`)),
    );
  });
}

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

afterEach(async () => {
  // A failed test must not leave servers or fixture processes behind.
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await waitForExit(child);
    }
  }
  for (const dir of dataDirs.splice(0)) {
    for (const pid of postmastersFor(path.join(dir, 'pg'))) process.kill(pid, 'SIGKILL');
    await fs.rm(dir, { recursive: true, force: true });
  }
});

// The process assertions read /proc.
describe.runIf(process.platform === 'linux')('startEmbeddedPostgres', () => {
  it(
    'keeps committed data across a stop and a restart, and takes over a stale owner pid file',
    async () => {
      const dataDir = await makeDataDir();
      const pgDir = path.join(dataDir, 'pg');
      const ownerFile = path.join(dataDir, 'switchboard.pid');

      // A pid file naming a process that has exited, as left by a crashed Switchboard.
      const gone = spawn(process.execPath, ['-e', '']);
      await waitForExit(gone);
      await fs.writeFile(ownerFile, `${gone.pid}\n`);

      const first = await startEmbeddedPostgres({ dataDir });
      expect(first.url).toMatch(/^postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/switchboard$/);
      expect((await fs.readFile(ownerFile, 'utf8')).trim()).toBe(String(process.pid));
      const credentials = JSON.parse(
        await fs.readFile(path.join(dataDir, 'pg-credentials.json'), 'utf8'),
      );
      expect(credentials.user).toBe('postgres');
      expect(first.url).toContain(`:${encodeURIComponent(credentials.password)}@`);
      if (process.platform !== 'win32') {
        const mode = (await fs.stat(path.join(dataDir, 'pg-credentials.json'))).mode & 0o777;
        expect(mode).toBe(0o600);
      }

      // Durable commits; new WAL segments not zero-filled while every commit waits.
      expect(
        await query(
          first.url,
          `SELECT name, setting FROM pg_settings
           WHERE name IN ('fsync', 'synchronous_commit', 'wal_init_zero') ORDER BY name`,
        ),
      ).toEqual([
        { name: 'fsync', setting: 'on' },
        { name: 'synchronous_commit', setting: 'on' },
        { name: 'wal_init_zero', setting: 'off' },
      ]);

      await query(first.url, 'CREATE TABLE notes (body text NOT NULL)');
      await query(first.url, "INSERT INTO notes (body) VALUES ('hello')");
      await first.stop();
      await first.stop(); // idempotent

      await expect(fs.access(ownerFile)).rejects.toThrow();
      expect(postmastersFor(pgDir)).toEqual([]);

      const second = await startEmbeddedPostgres({ dataDir });
      try {
        // Same stored password, new port.
        expect(second.url).toContain(`:${encodeURIComponent(credentials.password)}@`);
        expect(await query(second.url, 'SELECT body FROM notes')).toEqual([{ body: 'hello' }]);
      } finally {
        await second.stop();
      }
      expect(postmastersFor(pgDir)).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    'recovers after the owning Node process is killed with SIGKILL',
    async () => {
      const dataDir = await makeDataDir();
      const pgDir = path.join(dataDir, 'pg');

      const holder = await startHolder(dataDir);
      const leftover = await postmasterPid(pgDir);
      holder.child.kill('SIGKILL');
      expect(await waitForExit(holder.child)).toEqual({ code: null, signal: 'SIGKILL' });

      // The premise: the server outlives its parent as an orphan.
      expect(isAlive(leftover)).toBe(true);
      expect(postmastersFor(pgDir)).toEqual([leftover]);

      const logs: string[] = [];
      const server = await startEmbeddedPostgres({ dataDir, log: (line) => logs.push(line) });
      try {
        expect(isAlive(leftover)).toBe(false);
        const current = await postmasterPid(pgDir);
        expect(current).not.toBe(leftover);
        expect(postmastersFor(pgDir)).toEqual([current]);
        expect(logs.join('\n')).toContain(`stopping PostgreSQL (pid ${leftover})`);

        expect(await query(server.url, 'SELECT note FROM survivors')).toEqual([
          { note: 'committed before the crash' },
        ]);
      } finally {
        await server.stop();
      }
      expect(postmastersFor(pgDir)).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    'refuses a data directory whose owner is alive, without disturbing its server',
    async () => {
      const dataDir = await makeDataDir();
      const pgDir = path.join(dataDir, 'pg');

      const holder = await startHolder(dataDir);
      const serverPid = await postmasterPid(pgDir);

      await expect(startEmbeddedPostgres({ dataDir })).rejects.toThrow(
        `DATA_DIR ${dataDir} is in use by another Switchboard process (pid ${holder.child.pid})`,
      );
      expect(isAlive(serverPid)).toBe(true);
      expect((await fs.readFile(path.join(dataDir, 'switchboard.pid'), 'utf8')).trim()).toBe(
        String(holder.child.pid),
      );
      expect(await query(holder.url, 'SELECT count(*)::int AS n FROM survivors')).toEqual([
        { n: 1 },
      ]);

      // The owner shuts down gracefully on SIGTERM and releases the directory.
      holder.child.kill('SIGTERM');
      expect(await waitForExit(holder.child)).toEqual({ code: 0, signal: null });
      expect(isAlive(serverPid)).toBe(false);
      await expect(fs.access(path.join(dataDir, 'switchboard.pid'))).rejects.toThrow();
    },
    TIMEOUT,
  );

  it(
    'refuses a second start of the same directory within one process',
    async () => {
      const dataDir = await makeDataDir();
      const server = await startEmbeddedPostgres({ dataDir });
      try {
        await expect(startEmbeddedPostgres({ dataDir })).rejects.toThrow(
          `DATA_DIR ${dataDir} is in use by another Switchboard process (pid ${process.pid})`,
        );
        expect(await query(server.url, 'SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
      } finally {
        await server.stop();
      }
    },
    TIMEOUT,
  );
});
