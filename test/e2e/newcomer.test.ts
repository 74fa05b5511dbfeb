import { chmod, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { runCli, startService, type ServiceProcess } from './process.js';

/** Alive and not a zombie: an orphan stopped cleanly may linger as a zombie where PID 1 does not reap. */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

// The newcomer's path: the service on its own embedded PostgreSQL under DATA_DIR, as `npm start` runs it.
describe('the service on its embedded PostgreSQL', () => {
  let dataDir: string;
  const running: ServiceProcess[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-e2e-'));
    await chmod(dataDir, 0o755);
  });
  afterEach(async () => {
    // A test that failed half-way must not leave its service owning DATA_DIR for the next one.
    for (const s of running.splice(0)) {
      if (s.child.exitCode === null && s.child.signalCode === null) {
        s.child.kill('SIGTERM');
        await s.exited;
      }
    }
  });
  afterAll(async () => {
    // A SIGKILLed service leaves its PostgreSQL behind; one more start and stop clears it.
    const cleanup = await startService({ DATA_DIR: dataDir }).catch(() => null);
    if (cleanup) {
      cleanup.child.kill('SIGTERM');
      await cleanup.exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  it('starts on an empty store, prints the Default key once, survives kill -9 and stops on SIGTERM', async () => {
    const first = await startService({ DATA_DIR: dataDir });
    running.push(first);
    const key = /sb_live_[A-Za-z0-9_-]+/.exec(first.stdout())?.[0];
    expect(key, first.stdout()).toBeDefined();
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${first.base}/v1/contacts`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ phone: '+14155550199', name: 'Kept' }),
    });
    expect(created.status).toBe(201);
    const contact = (await created.json()) as { id: string };

    // kill -9: the embedded server is left behind as an orphan.
    first.child.kill('SIGKILL');
    await first.exited;
    const leftover = Number(
      (await readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0],
    );
    expect(isRunning(leftover)).toBe(true);

    const second = await startService({ DATA_DIR: dataDir });
    running.push(second);
    expect(second.stdout()).not.toMatch(/sb_live_/); // the key is printed only on the first start
    expect(isRunning(leftover)).toBe(false); // the orphan was stopped, not doubled
    const read = await fetch(`${second.base}/v1/contacts/${contact.id}`, { headers: auth });
    expect(read.status).toBe(200);
    expect(((await read.json()) as { name: string }).name).toBe('Kept');

    second.child.kill('SIGTERM');
    const exit = await second.exited;
    expect(exit.code).toBe(0);
    await expect(readFile(path.join(dataDir, 'switchboard.pid'))).rejects.toThrow();
  }, 120_000);

  it('refuses a second service on a DATA_DIR in use', async () => {
    const owner = await startService({ DATA_DIR: dataDir });
    running.push(owner);
    const intruder = await runCli({ DATA_DIR: dataDir, PORT: '0' }, ['serve']);
    expect(intruder.code).toBe(1);
    expect(intruder.stderr).toMatch(/in use by another Switchboard process/);
    owner.child.kill('SIGTERM');
    expect((await owner.exited).code).toBe(0);
  }, 90_000);

  it('refuses a busy port with one clear line before it makes or opens a store', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as net.AddressInfo;
    const fresh = await mkdtemp(path.join(tmpdir(), 'switchboard-busy-'));
    try {
      const result = await runCli({ DATA_DIR: fresh, HOST: '127.0.0.1', PORT: String(port) }, [
        'serve',
      ]);
      expect(result.code).toBe(1);
      expect(result.stderr.trim()).toBe(
        `switchboard: 127.0.0.1:${port} is in use: stop what listens there or set PORT (and HOST)`,
      );
      expect(result.stdout).not.toContain('sb_live_');
      expect(await readdir(fresh)).toEqual([]);
    } finally {
      taken.close();
      await rm(fresh, { recursive: true, force: true });
    }
  }, 60_000);

  it('stops with one clear line on a bad setting', async () => {
    const result = await runCli({ DATA_DIR: dataDir, PORT: 'eighty' }, ['serve']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      'switchboard: configuration error: PORT must be a whole number from 0 to 65535 (got "eighty")',
    );
  });
});
