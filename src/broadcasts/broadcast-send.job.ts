import type { JobHandler } from '../jobs/job-runner.js';
import type { BroadcastsService } from './broadcasts.service.js';

// A slice of batches per claim keeps one large broadcast from holding a worker slot for long.
const SLICE_MS = 2_000;

/** Sends a broadcast batch by batch, pacing batches to the channel's rate when one is set. */
export function broadcastSendJob(broadcasts: BroadcastsService): JobHandler<'broadcast.send'> {
  return {
    kind: 'broadcast.send',
    retryDelaysMs: [1000, 5000, 30_000, 120_000, 600_000],
    handle: async (job) => {
      const { broadcast_id: id } = job.payload;
      const channel = await broadcasts.channelOf(job.accountId, id);
      if (!channel) return { status: 'done' };
      const interval = broadcasts.batchIntervalMs(channel);
      const started = performance.now();
      for (;;) {
        const batchStarted = performance.now();
        if ((await broadcasts.sendNextBatch(job.accountId, id)) === 'done')
          return { status: 'done' };
        if (interval > 0) {
          return {
            status: 'continue',
            afterMs: Math.max(0, interval - (performance.now() - batchStarted)),
          };
        }
        if (performance.now() - started > SLICE_MS) return { status: 'continue', afterMs: 0 };
      }
    },
    onDead: (trx, job, lastError) =>
      broadcasts.failForGood(trx, job.accountId, job.payload.broadcast_id, lastError),
  };
}
