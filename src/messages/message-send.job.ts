import type { Tx } from '../db/database.js';
import type { JobHandler } from '../jobs/job-runner.js';
import type { MessagesRepository } from './messages.repository.js';
import type { MessagesService } from './messages.service.js';

/**
 * Sends what a send job still holds `queued`: after its first attempt (the API's or the
 * broadcast batch's own) asked to try again, or after whoever made it died before the provider
 * answered (its lease ended). The pipeline settles the job itself (done, or due again later on
 * its back-off schedule); the runner's own retries are for failures to reach the database.
 */
export function messageSendJob(
  messages: MessagesService,
  repository: MessagesRepository,
): JobHandler<'message.send'> {
  return {
    kind: 'message.send',
    retryDelaysMs: [1000, 5000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000],
    handle: async (job) => {
      const queued = await repository.findQueued(job.accountId, job.payload.message_ids);
      const byChannel = new Map<string, typeof queued>();
      for (const q of queued) byChannel.set(q.channel, [...(byChannel.get(q.channel) ?? []), q]);
      for (const [channel, group] of byChannel) {
        await messages.dispatch(
          job.accountId,
          channel as (typeof group)[number]['channel'],
          // The job itself: a renewal of its claim during the send moves job.lease, which the
          // runner fences its settling on.
          job,
          group,
          undefined,
          job.attempts,
          job.payload.connection_id,
        );
      }
      return { status: 'done' };
    },
    onDead: (trx: Tx, job, lastError) =>
      messages.failQueued(trx, job.accountId, job.payload.message_ids, lastError),
  };
}
