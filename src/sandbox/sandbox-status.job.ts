import { Batcher, groupBy } from '../db/batcher.js';
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

/**
 * Each job's reports, applied with the others of its account in one transaction. Should one
 * account's transaction fail after another's committed, the Batcher applies every job again on
 * its own: reports only move a message forward, so those already applied change nothing.
 */
async function applyGrouped(
  messages: MessagesService,
  jobs: Report[][],
): Promise<Array<Array<'applied' | 'unchanged' | 'unknown'>>> {
  const results: Array<Array<'applied' | 'unchanged' | 'unknown'>> = jobs.map(() => []);
  const steps = jobs.flatMap((reports, job) => reports.map((report) => ({ job, report })));
  for (const [accountId, group] of groupBy(steps, (s) => s.report.accountId)) {
    const applied = await messages.applyStatusMany(
      { accountId },
      group.map(({ report }) => ({
        messageId: report.messageId,
        status: report.status,
        reason: report.reason,
      })),
    );
    group.forEach(({ job }, k) => results[job]!.push(applied[k]!));
  }
  return results;
}
