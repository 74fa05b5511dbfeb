import fs from 'node:fs/promises';
import path from 'node:path';
import { stopServer, type Cluster } from './pg-ctl.js';
import { processState, runsInDirectory, signal, waitForPidExit } from './processes.js';
import { errMessage, parsePid, readIfExists } from './util.js';

/**
 * Crash recovery: a server left running by a Switchboard that was killed (SIGKILL) is found
 * through its postmaster.pid and stopped with pg_ctl before a new one starts, so two servers
 * never run on one directory. What pg_ctl cannot judge is decided here: a pid that a zombie or
 * an unrelated process now holds makes the lock file stale, and it is removed.
 */
export async function stopLeftoverServer(
  cluster: Cluster,
  log: (line: string) => void,
): Promise<void> {
  const lockFile = path.join(cluster.pgDir, 'postmaster.pid');
  const pid = parsePid(await readIfExists(lockFile));
  if (pid === undefined) return;

  const state = processState(pid);
  if (state === 'dead') return; // postgres itself recognises and replaces a stale lock file

  const servesThisDir = state === 'alive' && (await runsInDirectory(pid, cluster.pgDir));
  if (servesThisDir) {
    log(`embedded-postgres: stopping PostgreSQL (pid ${pid}) left running by a previous process`);
    try {
      await stopServer(cluster);
    } catch (err) {
      log(
        `embedded-postgres: pg_ctl could not stop PostgreSQL (pid ${pid}); killing it: ${errMessage(err)}`,
      );
    }
    if (!(await waitForPidExit(pid, 1_000))) {
      signal(pid, 'SIGKILL');
      if (!(await waitForPidExit(pid, 10_000))) {
        throw new Error(
          `Could not stop the leftover PostgreSQL server (pid ${pid}) in ${cluster.pgDir}`,
        );
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
