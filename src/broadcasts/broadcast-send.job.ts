import type { ClaimKeeper } from '../jobs/claim-keeper.js';
import type { ClaimedJob, JobHandler, JobOutcome } from '../jobs/job-runner.js';
import type { BroadcastsService } from './broadcasts.service.js';

// A slice of batches per claim keeps one large broadcast from holding a worker slot for long.
const SLICE_MS = 2_000;
/**
 * Batches with the provider at once (besides the one being recorded `queued`): while one batch's
 * calls wait on the provider and another's answers are being recorded, both have work.
 */
const IN_FLIGHT = 2;

/**
 * Sends a broadcast batch by batch, pacing batches to the channel's rate when one is set (shared by
 * the account's broadcasts on that channel).
 */
export function broadcastSendJob(
  broadcasts: BroadcastsService,
  claims: ClaimKeeper,
): JobHandler<'broadcast.send'> {
  return {
    kind: 'broadcast.send',
    retryDelaysMs: [1000, 5000, 30_000, 120_000, 600_000],
    // Its dispatches may wait on slow provider calls past a lease: the claim is kept meanwhile,
    // so that no other runner starts more batches of the same broadcast beside them.
    handle: async (job) => {
      const release = claims.keep(job);
      try {
        return await sendSome(broadcasts, job);
      } finally {
        await release();
      }
    },
    onDead: (trx, job, lastError) =>
      broadcasts.failForGood(trx, job.accountId, job.payload.broadcast_id, lastError),
  };
}

/** One run of a broadcast's send job: a paced batch, or unpaced batches for a slice of time. */
async function sendSome(
  broadcasts: BroadcastsService,
  job: ClaimedJob<'broadcast.send'>,
): Promise<JobOutcome> {
  const { broadcast_id: id } = job.payload;
  const channel = await broadcasts.channelOf(job.accountId, id);
  if (!channel) return { status: 'done' };
  const interval = broadcasts.batchIntervalMs(channel);
  if (interval > 0) {
    // Paced: one batch per run, the next when the channel's rate allows. The rate is the
    // connection's: broadcasts on one channel of an account take turns at it.
    const sent = await broadcasts.sendNextBatch(job.accountId, id);
    if (sent === 'done') return { status: 'done' };
    if (sent !== 'more') return { status: 'continue', afterMs: sent.waitMs };
    return { status: 'continue', afterMs: await broadcasts.pacingWaitMs(job.accountId, channel) };
  }
  // Unpaced: the next batch is recorded `queued` while up to IN_FLIGHT earlier ones are
  // with the provider; the broadcast finishes only after the last dispatch has returned.
  const started = performance.now();
  const inFlight = new Set<Promise<void>>();
  // A failed dispatch fails the run where the loop next looks, not as an unobserved
  // rejection (which would end the process).
  const failures: unknown[] = [];
  const settle = async (wait: 'none' | 'one' | 'all') => {
    if (wait === 'one' && inFlight.size > 0) await Promise.race(inFlight);
    if (wait === 'all') await Promise.all(inFlight);
    if (failures.length > 0) throw failures[0];
  };
  try {
    for (;;) {
      const step = await broadcasts.queueNextBatch(job.accountId, id, inFlight.size === 0);
      if (step === 'done') return { status: 'done' };
      if (step === 'drained') {
        await settle('all');
        continue;
      }
      // Every recipient queued, some still waiting for the provider: look again later.
      if ('waitMs' in step) return { status: 'continue', afterMs: step.waitMs };
      await settle(inFlight.size < IN_FLIGHT ? 'none' : 'one');
      const dispatch: Promise<void> = step
        .dispatch()
        .catch((error: unknown) => void failures.push(error))
        .finally(() => inFlight.delete(dispatch));
      inFlight.add(dispatch);
      if (performance.now() - started > SLICE_MS) {
        await settle('all');
        return { status: 'continue', afterMs: 0 };
      }
    }
  } finally {
    // A failure must not leave a dispatch running unobserved past the job's end.
    await Promise.all(inFlight);
  }
}
