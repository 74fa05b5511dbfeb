import type { OutboundMessage, SendOutcome } from '../channels/channel.js';
import type { Channel } from '../db/schema.js';
import type { HeldJob, NewJob } from '../jobs/job-queue.js';
import type { MessageRow, OutboundRecord } from './messages.repository.js';

/* The shapes a send takes through the SendPipeline, and the helpers of its recording. */

/** A queued message, with what its provider needs, and the send job that carries it. */
export interface QueuedSend {
  accountId: string;
  channel: Channel;
  jobId: string;
  /**
   * The claim on the job its caller holds: the job is settled only while it still stands. The
   * pipeline moves it forward as it renews the claim during a long batch.
   */
  lease: Date;
  /**
   * The connection these messages were queued for (null: the sandbox, or a test's override):
   * they are handed to no other. Undefined while not known (a broadcast batch's first attempt,
   * a job written before it was recorded): the pipeline then records the one it used.
   */
  connectionId?: string | null;
  /**
   * 1 for the caller's own first attempt; more for a runner's, which may follow a holder that
   * died mid-call (see send-recorder.ts).
   */
  attempt: number;
  messages: OutboundMessage[];
  /** Whether the observer hears of these messages' changes (see MessageObserver.observes). */
  observed: boolean;
}

/** Where a queued message ended after an attempt. */
export type SendResult = { row: MessageRow | null; outcome: SendOutcome };

/**
 * The provider is never called inside a transaction. A message is recorded `queued` with its
 * send job (by the caller, in the transaction that decides to send it); after the commit this
 * hands it to the provider and records the outcome in a second transaction: `sent` with the
 * provider's id, `failed` with the reason and a `message.failed` event, or still `queued` with
 * the job released to try again later. Whoever dies in between, the job's lease ends and a
 * runner sends again: for webchat and the sandbox, at least once; for a real provider, at most
 * once (answers recorded as they come, and what may have been handed out failed, never resent:
 * see send-recorder.ts). Once in our records.
 */
export interface RecordPlan {
  send: QueuedSend;
  outcomes: Map<string, SendOutcome>;
  records: OutboundRecord[];
  /** Null when nothing is left to try: the job is done. */
  retry: { afterMs: number; error: string } | null;
  /** Answers recorded while the batch runs: the job is neither finished nor settled. */
  partial?: boolean;
  /**
   * Every call of the job's attempts so far is answered in this record (a first attempt, or one
   * that failed its predecessor's hand-outs first): a retry releases the job with none in doubt.
   */
  handedNone?: boolean;
}

/** What a final answer (accepted or failed) writes on its message. */
export function finalRecord(
  id: string,
  outcome: Exclude<SendOutcome, { status: 'retry' }>,
): OutboundRecord {
  return outcome.status === 'accepted'
    ? { id, status: 'sent', providerMessageId: outcome.providerMessageId }
    : { id, status: 'failed', reason: outcome.reason };
}

/** One attempt's answers, and those of them recorded already while it ran (a tracked provider). */
export interface Called {
  outcomes: Map<string, SendOutcome>;
  flushed?: { flushed: Set<string>; rows: MessageRow[] };
}

/**
 * Whether recording the plan writes only its messages' new status, its job's end and the
 * sandbox's simulated reports: every message accepted (no `message.failed` event), the job
 * done, and nothing the observer hears of.
 */
export function onlyAccepted(plan: RecordPlan): boolean {
  return (
    plan.retry === null &&
    !plan.partial &&
    !plan.send.observed &&
    plan.records.every((r) => r.status === 'sent') &&
    [...plan.outcomes.values()].every((o) => o.status === 'accepted')
  );
}

/** The sandbox's simulated reports on an accepted message, as the jobs that apply them. */
export function simulatedReports(
  accountId: string,
  messageId: string,
  outcome: SendOutcome,
): NewJob[] {
  if (outcome.status !== 'accepted' || !outcome.simulatedReports) return [];
  return outcome.simulatedReports.map((r) => ({
    accountId,
    kind: 'sandbox.status' as const,
    payload: {
      v: 1 as const,
      message_id: messageId,
      status: r.status,
      ...(r.reason ? { reason: r.reason } : {}),
    },
    delayMs: r.afterMs,
  }));
}

export function disconnected(channel: Channel): string {
  return `the ${channel} channel was disconnected before the message could be sent`;
}

export function heldJob(plan: Pick<RecordPlan, 'send'>): HeldJob {
  return { accountId: plan.send.accountId, id: plan.send.jobId, lease: plan.send.lease };
}

/** For each plan, its messages whose row changed. */
export function changedRows(
  plans: RecordPlan[],
  changedById: Map<string, MessageRow>,
): MessageRow[][] {
  return plans.map((p) =>
    p.records.flatMap((r) => {
      const row = changedById.get(r.id);
      return row ? [row] : [];
    }),
  );
}
