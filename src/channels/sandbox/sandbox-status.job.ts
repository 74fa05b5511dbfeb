import type { JobHandler } from '../../jobs/job-runner.js';
import type { MessagesService } from '../../messages/messages.service.js';

/** Applies a simulated delivery report when its time comes; repeats are harmless (forward-only). */
export function sandboxStatusJob(messages: MessagesService): JobHandler<'sandbox.status'> {
  return {
    kind: 'sandbox.status',
    retryDelaysMs: [1000, 5000, 30_000, 120_000],
    handle: async (job) => {
      await messages.applyStatus(
        { accountId: job.accountId },
        { messageId: job.payload.message_id, status: job.payload.status, reason: job.payload.reason },
      );
      return { status: 'done' };
    },
  };
}
