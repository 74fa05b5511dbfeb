import { Batcher } from '../db/batcher.js';
import { NotFound } from '../errors.js';
import type { JobHandler } from '../jobs/job-runner.js';
import type { MessagesService } from '../messages/messages.service.js';

/** A simulated report as its job carries it. */
interface Report {
  accountId: string;
  messageId: string;
  status: 'delivered' | 'read' | 'failed';
  reason: string | null;
}

/** Reports applied per transaction at most; more wait for the next. */
const GROUP_MAX = 200;

/**
 * Applies a simulated delivery report when its time comes; repeats are harmless (forward-only).
 * A simulated read implies delivery: when the read job runs first (both overdue and run side by
 * side, or the delivered job held by a stalled worker), it reports delivered before read, so the
 * message still emits both events, in order.
 *
 * The reports of the jobs running at the same time are applied together, one transaction per
 * account (group commit): every send on the sandbox is followed by two of them, which one by one
 * cost more than the send itself. A group that fails is applied again job by job.
 */
export function sandboxStatusJob(messages: MessagesService): JobHandler<'sandbox.status'> {
  const reports = new Batcher<Report[], Array<'applied' | 'unchanged' | 'unknown'>>(
    (jobs) => applyGrouped(messages, jobs),
    { maxBatch: GROUP_MAX },
  );
  return {
    kind: 'sandbox.status',
    retryDelaysMs: [1000, 5000, 30_000, 120_000],
    handle: async (job) => {
      const { accountId } = job;
      const { message_id: messageId, status } = job.payload;
      const reason = job.payload.reason ?? null;
      const steps: Report[] =
        status === 'read'
          ? [
              { accountId, messageId, status: 'delivered', reason: null },
              { accountId, messageId, status, reason },
            ]
          : [{ accountId, messageId, status, reason }];
      const results = await reports.submit(steps);
      if (results.includes('unknown')) throw new NotFound('message', messageId);
      return { status: 'done' };
    },
  };
}

/** Each job's reports, applied with the others of its account in one transaction. */
async function applyGrouped(
  messages: MessagesService,
  jobs: Report[][],
): Promise<Array<Array<'applied' | 'unchanged' | 'unknown'>>> {
  const byAccount = new Map<string, number[]>();
  jobs.forEach((steps, i) => {
    const accountId = steps[0]!.accountId;
    byAccount.set(accountId, [...(byAccount.get(accountId) ?? []), i]);
  });
  const results: Array<Array<'applied' | 'unchanged' | 'unknown'>> = jobs.map(() => []);
  for (const [accountId, indexes] of byAccount) {
    const flat = indexes.flatMap((i) => jobs[i]!.map((step) => ({ job: i, step })));
    const applied = await messages.applyStatusMany(
      { accountId },
      flat.map(({ step }) => ({
        messageId: step.messageId,
        status: step.status,
        reason: step.reason,
      })),
    );
    flat.forEach(({ job }, k) => results[job]!.push(applied[k]!));
  }
  return results;
}
