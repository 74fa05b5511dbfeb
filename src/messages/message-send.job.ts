import type { Tx } from '../db/database.js';
import type { JobHandler } from '../jobs/job-runner.js';
import type { MessagesRepository } from './messages.repository.js';
import type { MessagesService } from './messages.service.js';
import { SEND_RETRY_DELAYS_MS } from './send-pipeline.js';

/**
 * Sends what a send job still holds `queued`: after its first attempt (the API's or the
 * broadcast batch's own) asked to try again, or after whoever made it died before the provider
 * answered (its lease ended; towards a real provider, what it may have handed out is failed in
 * doubt first, never sent twice: see send-recorder.ts). The pipeline settles the job itself (done, or due again later on
 * its back-off schedule); the runner's own retries are for failures to reach the database.
 */
export function messageSendJob(
  messages: MessagesService,
  repository: MessagesRepository,
): JobHandler<'message.send'> {
  return {
    kind: 'message.send',
    // The job's attempts count the provider's answers too (the pipeline's own retries, on the
    // same schedule), so a run that fails (the database away) waits as a send retry would, and
    // the job is kept dead only once a send's whole day of retries is spent: an error after
    // twenty throttled minutes is one more retry, not the end.
    retryDelaysMs: SEND_RETRY_DELAYS_MS,
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
          // At least 2 (the first attempt was its writer's): the pipeline first fails what a
          // holder that died may have handed to a real provider (see send-recorder.ts).
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
