import fs from 'node:fs/promises';
import { processState } from './processes.js';
import { errnoCode, parsePid, readIfExists } from './util.js';

// A single Switchboard process owns a data directory: the pid file guards against other
// processes, and this set against a second start of the same directory inside this process,
// which would otherwise "recover" (stop) our own server.
const activeDataDirs = new Set<string>();

export function inUseError(dataDir: string, pid: number): Error {
  return new Error(`DATA_DIR ${dataDir} is in use by another Switchboard process (pid ${pid})`);
}

/** Synchronous, so two concurrent starts in one process cannot both pass the check. */
export function claimInProcess(dataDir: string): void {
  if (activeDataDirs.has(dataDir)) throw inUseError(dataDir, process.pid);
  activeDataDirs.add(dataDir);
}

export function releaseInProcess(dataDir: string): void {
  activeDataDirs.delete(dataDir);
}

export async function claimOwnership(pidFile: string, dataDir: string): Promise<void> {
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

export async function releaseOwnership(pidFile: string): Promise<void> {
  // Never delete a pid file that a newer owner has written after us.
  if (parsePid(await readIfExists(pidFile)) === process.pid) {
    await fs.rm(pidFile, { force: true });
  }
}
