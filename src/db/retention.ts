import { sql, type RawBuilder } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../clock.js';
import type { Db } from './database.js';

/**
 * Runs `DELETE FROM table WHERE ctid IN (<rows>)` until fewer than `batchSize` go, so that no
 * statement holds locks on (or writes WAL for) everything due at once. `rows(limit)` selects the
 * `ctid`s of up to `limit` rows to delete. Returns how many were deleted.
 */
export async function deleteInBatches(
  db: Db,
  table: string,
  rows: (limit: number) => RawBuilder<unknown>,
  batchSize: number,
): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result =
      await sql`DELETE FROM ${sql.table(table)} WHERE ctid IN (${rows(batchSize)})`.execute(db);
    const n = Number(result.numAffectedRows ?? 0n);
    deleted += n;
    if (n < batchSize) return deleted;
  }
}

/**
 * A feature's rows that outlive their use: `prune` deletes those older than `before` (in batches,
 * see deleteInBatches) and answers how many went. Each feature offers its own; the workers run
 * them all (scheduleRetention).
 */
export interface PruneTask {
  /** The name the retention log gives the count under. */
  name: string;
  /** Rows older than this are due. */
  maxAgeMs: number;
  prune(db: Db, before: Date): Promise<number>;
}

/**
 * Runs every task now and every `everyMs`, in order; the returned function stops it. Run by the
 * workers. A run still going when the next is due (a large backlog, a slow database) makes that
 * one skip: two would compete for the same rows.
 */
export function scheduleRetention(
  deps: { db: Db; clock: Clock; log: FastifyBaseLogger },
  tasks: readonly PruneTask[],
  everyMs = 600_000,
): () => void {
  let running = false;
  const names = tasks.map((t) => t.name).join(', ');
  const prune = async () => {
    const now = deps.clock.now().getTime();
    try {
      const counts: Record<string, number> = {};
      let total = 0;
      for (const task of tasks) {
        const n = await task.prune(deps.db, new Date(now - task.maxAgeMs));
        counts[task.name] = n;
        total += n;
      }
      if (total > 0) deps.log.info(counts, `pruned ${names}`);
    } catch (err) {
      deps.log.warn({ err }, `pruning ${names} failed; next try at the next run`);
    }
  };
  const run = () => {
    if (running) return;
    running = true;
    void prune().finally(() => (running = false));
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
