import type { JobHandler } from '../jobs/job-runner.js';
import type { MessagesService } from '../messages/messages.service.js';

/**
 * Applies a simulated delivery report when its time comes; repeats are harmless (forward-only).
 * A simulated read implies delivery: when the read job runs first (both overdue and run side by
 * side, or the delivered job held by a stalled worker), it reports delivered before read, so the
 * message still emits both events, in order.
 */
export function sandboxStatusJob(messages: MessagesService): JobHandler<'sandbox.status'> {
  return {
    kind: 'sandbox.status',
    retryDelaysMs: [1000, 5000, 30_000, 120_000],
    handle: async (job) => {
      const scope = { accountId: job.accountId };
      const messageId = job.payload.message_id;
      if (job.payload.status === 'read')
        await messages.applyStatus(scope, { messageId, status: 'delivered' });
      await messages.applyStatus(scope, {
        messageId,
        status: job.payload.status,
        reason: job.payload.reason,
      });
      return { status: 'done' };
    },
  };
}
