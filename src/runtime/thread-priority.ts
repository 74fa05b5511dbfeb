import { access, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * Makes sure libuv's thread pool (async fs, DNS lookups, crypto) exists before another thread
 * lowers its own priority: the pool's threads are made on first use by the thread that uses
 * it, and take that thread's nice value. Called on the main thread before it starts a worker.
 */
export function startThreadPool(): void {
  access('.', () => undefined);
}

/**
 * Lowers the calling thread's CPU priority by `nice` steps (at most to 19), so that under full
 * CPU the process's other threads run first. Linux only, where a nice value is each thread's own
 * and /proc/thread-self names the thread; elsewhere (or with 0) nothing changes. Answers the
 * nice value the thread now has, or null when it was left as it was.
 */
export function lowerThreadPriority(nice: number): number | null {
  if (nice <= 0 || process.platform !== 'linux') return null;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return null;
    const value = Math.min(19, getPriority(tid) + nice);
    setPriority(tid, value);
    return getPriority(tid);
  } catch {
    return null;
  }
}
