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
      if (interval > 0) {
        // Paced: one batch per run, the next when the channel's rate allows.
        const batchStarted = performance.now();
        if ((await broadcasts.sendNextBatch(job.accountId, id)) === 'done')
          return { status: 'done' };
        return {
          status: 'continue',
          afterMs: Math.max(0, interval - (performance.now() - batchStarted)),
        };
      }
      // Unpaced: batch k+1 is recorded while batch k is with the provider (one in flight at
      // most); the broadcast finishes only after the last dispatch has returned.
      const started = performance.now();
      let inFlight: Promise<void> | null = null;
      try {
        for (;;) {
          const step = await broadcasts.queueNextBatch(job.accountId, id, inFlight === null);
          if (step === 'done') return { status: 'done' };
          const previous = inFlight;
          inFlight = null;
          await previous;
          if (step === 'drained') continue;
          inFlight = step.dispatch();
          if (performance.now() - started > SLICE_MS) {
            await inFlight;
            return { status: 'continue', afterMs: 0 };
          }
        }
      } finally {
        // A failure must not leave a dispatch running unobserved past the job's end.
        await inFlight?.catch(() => undefined);
      }
    },
    onDead: (trx, job, lastError) =>
      broadcasts.failForGood(trx, job.accountId, job.payload.broadcast_id, lastError),
  };
}
