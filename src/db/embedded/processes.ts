import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { delay, errnoCode } from './util.js';

// What pg_ctl cannot tell us: whether a pid is a zombie, or a reused pid that is no postmaster
// of ours at all. Crash recovery needs both (see recovery.ts).

export type ProcessState = 'alive' | 'zombie' | 'dead';

export function processState(pid: number): ProcessState {
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

/**
 * Whether `pid` is a postmaster for `pgDir`. The postmaster chdirs into its data directory,
 * so on Linux /proc/<pid>/cwd tells a reused pid apart from our leftover server. Elsewhere
 * we cannot tell and assume it is ours, which is what the lock file claims.
 */
export async function runsInDirectory(pid: number, pgDir: string): Promise<boolean> {
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

export async function waitForPidExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (processState(pid) === 'alive') {
    if (Date.now() >= deadline) return false;
    await delay(100);
  }
  return true;
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if (errnoCode(err) !== 'ESRCH') throw err;
  }
}
