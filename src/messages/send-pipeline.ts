import type { ChannelProvider, ProviderResolver, SendOutcome } from '../channels/channel.js';
import { AppError } from '../errors.js';
import type { Clock } from '../clock.js';
import { Batcher, groupBy } from '../db/batcher.js';
import type { Db, Tx } from '../db/database.js';
import { isDatabaseUnavailable } from '../db/errors.js';
import type { Outbox } from '../events/outbox.js';
import type { JobQueue, NewJob } from '../jobs/job-queue.js';
import type { Metrics } from '../metrics/metrics.js';
import { toMessage } from './messages.present.js';
import type { MessageRow, MessagesRepository, OutboundRecord } from './messages.repository.js';
import {
  changedRows,
  finalRecord,
  disconnected,
  heldJob,
  onlyAccepted,
  simulatedReports,
  type Called,
  type QueuedSend,
  type RecordPlan,
  type SendResult,
} from './send-plans.js';
import type { MessageObserver } from './message-observer.js';
import {
  HAND_OUT_AHEAD,
  IN_DOUBT_REASON,
  HandOut,
  takeOver,
  tracksHandOut,
  moveMark,
  type Flush,
} from './send-recorder.js';

/**
 * Delays between attempts at a message the provider could not take yet: within about 2 s,
 * 10 s and 30 s first, then growing to an hour apart, for 24 hours in all; after the last, the
 * message fails. The first attempt is the API's (or the broadcast batch's) own.
 */
export const SEND_RETRY_DELAYS_MS: readonly number[] = (() => {
  const delays = [2, 10, 30, 60, 120, 300, 600, 1200, 1800].map((s) => s * 1000);
  let total = delays.reduce((a, b) => a + b, 0);
  while (total < 24 * 3600_000) {
    delays.push(3600_000);
    total += 3600_000;
  }
  return delays;
})();

/** A provider's hint (Retry-After) is honoured up to an hour. */
const MAX_HINT_MS = 3600_000;
/** Calls in flight at once for one batch (a broadcast batch is hundreds of messages). */
const CONCURRENCY = 64;
/**
 * How long a claim on a send job holds: longer than any provider call may take. A batch whose
 * calls take longer in all renews its claim as it goes (see `SendPipeline.holdLease`).
 */
export const SEND_LEASE_MS = 60_000;
/** The first and the longest wait between tries at recording answers while the database is away. */
const RECORD_RETRY_FIRST_MS = 100;
const RECORD_RETRY_MAX_MS = 2_000;

export type { QueuedSend, RecordPlan, SendResult } from './send-plans.js';

export class SendPipeline {
  private readonly recorder = new Batcher<RecordPlan, MessageRow[]>(
    (plans) => this.recordMany(plans),
    { maxBatch: 200, maxConcurrent: 2 },
  );
  /** Answers recorded while batches run: never in the way of an attempt's last record. */
  private readonly flusher = new Batcher<RecordPlan, MessageRow[]>(
    (plans) => this.recordMany(plans),
    { maxBatch: 200, maxConcurrent: 2 },
  );

  constructor(
    private readonly deps: {
      db: Db;
      messages: MessagesRepository;
      providers: ProviderResolver;
      jobs: JobQueue;
      outbox: Outbox;
      metrics: Metrics;
      clock: Clock;
      /** Who hears of status changes of outbound messages (the broadcast funnel). */
      observer: MessageObserver;
      /** How long a send job's claim holds, and how far a renewal moves it (SEND_LEASE_MS). */
      leaseMs?: number;
    },
  ) {}

  /**
   * One attempt at the send's messages, then its outcomes recorded and its job settled, in one
   * transaction. Answers with each message's row as it now stands. The only way to a provider:
   * its steps are private.
   */
  async attempt(send: QueuedSend, provider?: ChannelProvider): Promise<Map<string, SendResult>> {
    const { outcomes, flushed } = await this.callProvider(send, provider);
    const plan = this.plan(send, outcomes);
    plan.handedNone = send.attempt === 1 || flushed !== undefined;
    if (!flushed) return this.results(plan, await this.recordWhileHeld(plan));
    plan.records = plan.records.filter((r) => !flushed.flushed.has(r.id));
    return this.results(plan, [...flushed.rows, ...(await this.recordWhileHeld(plan))]);
  }

  /** Records answers while the batch runs (see HandOut). */
  private flush(send: QueuedSend, f: Flush): Promise<MessageRow[]> {
    return this.recordWhileHeld({ send, ...f, retry: null, partial: true });
  }

  /**
   * Records an attempt's answers and settles its job, grouped with the attempts recorded at the
   * same time (answers the plan's messages whose row changed); tried again while the database is
   * unreachable (restarting, failing over) and the send's claim still holds: the provider has
   * these messages now, and answers given up would leave them to the job's next runner once the
   * claim ends (sent again on webchat and the sandbox, failed in doubt elsewhere). Any other
   * failure, or the claim running out, is thrown as before.
   */
  private async recordWhileHeld(plan: RecordPlan): Promise<MessageRow[]> {
    for (let wait = RECORD_RETRY_FIRST_MS; ; wait = Math.min(wait * 2, RECORD_RETRY_MAX_MS)) {
      try {
        return await (plan.partial ? this.flusher : this.recorder).submit(plan);
      } catch (err) {
        const holdsAfterWait = plan.send.lease.getTime() - this.deps.clock.now().getTime() > wait;
        if (!isDatabaseUnavailable(err) || !holdsAfterWait) throw err;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /**
   * Calls the provider for every message, a few at a time; never throws. Messages queued for a
   * connection go to that connection only: gone or replaced since, they fail for good. A batch
   * that outlasts half its claim renews it before its next call; should the claim be lost
   * (another runner took the job), the calls stop and the rest is left to that runner.
   */
  private async callProvider(send: QueuedSend, given?: ChannelProvider): Promise<Called> {
    const outcomes = new Map<string, SendOutcome>();
    const chosen = await this.choose(send, given);
    if ('outcome' in chosen) {
      for (const m of send.messages) outcomes.set(m.messageId, chosen.outcome);
      return { outcomes };
    }
    const provider = chosen.provider;
    const handOut = tracksHandOut(provider) ? await this.handOut(send) : undefined;
    // The claim lost before the first call: every message is left to the job's next runner.
    if (handOut === null) return { outcomes };
    let next = 0;
    const worker = async () => {
      while (next < send.messages.length) {
        if (!this.leaseLasts(send) && !(await this.renewLease(send, handOut))) return;
        // Another worker may have taken the last message while this one renewed.
        if (next >= send.messages.length) return;
        const index = next++;
        const message = send.messages[index]!;
        if (handOut && !(await handOut.mayHandOut(index))) return;
        let outcome: SendOutcome;
        try {
          outcome = await provider.send(message);
        } catch (err) {
          outcome = { status: 'retry', reason: err instanceof Error ? err.message : String(err) };
        }
        if (outcome.status !== 'accepted')
          this.deps.metrics.providerError(send.channel, provider.name);
        outcomes.set(message.messageId, outcome);
        handOut?.answered(message.messageId, outcome);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, send.messages.length) }, worker));
    return { outcomes, ...(handOut ? { flushed: await handOut.finish() } : {}) };
  }

  /**
   * The tracking of a real provider's hand-outs (messages put in id order, the order the job's
   * mark follows). A runner's attempt first fails what its job's last holder may have handed
   * out; null when the claim was lost meanwhile.
   */
  private async handOut(send: QueuedSend): Promise<HandOut | null> {
    send.messages.sort((a, b) =>
      a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0,
    );
    const io = {
      mark: (upTo: string, notTaken: string[]) =>
        moveMark(this.deps.db, heldJob({ send }), upTo, notTaken),
      record: (f: Flush) => this.flush(send, f),
    };
    if (send.attempt === 1) {
      const reserved = Math.min(send.messages.length, HAND_OUT_AHEAD);
      return new HandOut(send.messages, { reserved, narrow: send.messages.length > reserved }, io);
    }
    const taken = await takeOver(this.deps.db, heldJob({ send }), send.messages, (trx, ids) =>
      this.recordFailures(trx, send.accountId, ids, IN_DOUBT_REASON),
    );
    if (!taken) return null;
    send.messages = taken.rest;
    return new HandOut(send.messages, { reserved: taken.reserved, narrow: false }, io);
  }

  /**
   * The provider of this attempt, and (in `send.connectionId`) the connection it sends through;
   * or the outcome of every message when there is none to hand them to.
   */
  private async choose(
    send: QueuedSend,
    given: ChannelProvider | undefined,
  ): Promise<{ provider: ChannelProvider } | { outcome: SendOutcome }> {
    if (given && send.connectionId !== undefined) return { provider: given };
    let current;
    try {
      current = await this.deps.providers.resolveWithConnection(send.accountId, send.channel);
    } catch (err) {
      // The caller chose its provider already; only which connection it is stays unknown.
      if (given) return { provider: given };
      const reason = err instanceof Error ? err.message : String(err);
      // Not connected with the sandbox off, or credentials that cannot be read: for good.
      // Anything else (the database busy, a pool timeout) may pass: tried again later.
      if (!(err instanceof AppError && err.status === 422))
        return { outcome: { status: 'retry', reason: `choosing the provider failed: ${reason}` } };
      if (send.connectionId)
        return { outcome: { status: 'failed', reason: disconnected(send.channel) } };
      return { outcome: { status: 'failed', reason } };
    }
    if (given) {
      if (current.provider === given) send.connectionId = current.connectionId;
      return { provider: given };
    }
    if (send.connectionId !== undefined && current.connectionId !== send.connectionId) {
      const reason =
        current.connectionId === null
          ? disconnected(send.channel)
          : `the ${send.channel} channel was connected anew before the message could be sent; it was queued for another connection`;
      return { outcome: { status: 'failed', reason } };
    }
    send.connectionId = current.connectionId;
    return { provider: current.provider };
  }

  /** Whether the send's claim holds long enough for one more provider call (half a lease). */
  private leaseLasts(send: QueuedSend): boolean {
    return send.lease.getTime() - this.deps.clock.now().getTime() > this.leaseMs() / 2;
  }

  private readonly renewals = new WeakMap<QueuedSend, Promise<boolean>>();

  /**
   * Moves the send's claim a lease ahead, only while it is still held (one renewal at a time
   * per send); false when it was lost.
   */
  private renewLease(send: QueuedSend, handOut?: HandOut): Promise<boolean> {
    let renewal = this.renewals.get(send);
    if (!renewal) {
      const until = new Date(this.deps.clock.now().getTime() + this.leaseMs());
      const extend = () =>
        this.deps.jobs.extend(this.deps.db, send.accountId, send.jobId, send.lease, until);
      renewal = (handOut ? handOut.serial(extend) : extend())
        .then(
          (held) => {
            if (held) send.lease = until;
            return held;
          },
          // A failed renewal keeps the claim as it was: the calls go on while it lasts.
          () => send.lease.getTime() > this.deps.clock.now().getTime(),
        )
        .finally(() => this.renewals.delete(send));
      this.renewals.set(send, renewal);
    }
    return renewal;
  }

  private leaseMs(): number {
    return this.deps.leaseMs ?? SEND_LEASE_MS;
  }

  /** What one attempt's answers mean for its messages and its job. */
  plan(send: QueuedSend, outcomes: Map<string, SendOutcome>): RecordPlan {
    const lastAttempt = SEND_RETRY_DELAYS_MS[send.attempt - 1] === undefined;
    const records: OutboundRecord[] = [];
    let retryAfterMs = 0;
    let retryReason = '';
    // A message the attempt never reached (it stopped when its claim could not be kept) is tried
    // again like a throttled one: the job must live on while any of its messages is queued.
    const answered: [string, SendOutcome][] = [...outcomes];
    for (const m of send.messages)
      if (!outcomes.has(m.messageId))
        answered.push([
          m.messageId,
          { status: 'retry', reason: 'not tried: the send job could not keep its claim' },
        ]);
    for (const [id, outcome] of answered) {
      if (outcome.status !== 'retry') {
        records.push(finalRecord(id, outcome));
      } else if (lastAttempt) {
        records.push({
          id,
          status: 'failed',
          reason: `not accepted by the provider within 24 hours: ${outcome.reason}`,
        });
      } else {
        retryAfterMs = Math.max(retryAfterMs, Math.min(outcome.afterMs ?? 0, MAX_HINT_MS));
        retryReason = outcome.reason;
      }
    }
    return {
      send,
      outcomes,
      records,
      retry:
        retryReason === ''
          ? null
          : {
              afterMs: Math.max(retryAfterMs, SEND_RETRY_DELAYS_MS[send.attempt - 1]!),
              error: retryReason,
            },
    };
  }

  /** Each message of the plan's attempt with its row as it now stands (null: unchanged). */
  private results(plan: RecordPlan, changed: MessageRow[]): Map<string, SendResult> {
    const byId = new Map(changed.map((row) => [row.id, row]));
    const results = new Map<string, SendResult>();
    for (const [id, outcome] of plan.outcomes)
      results.set(id, { row: byId.get(id) ?? null, outcome });
    return results;
  }

  /**
   * Records the answers of many attempts (concurrent API sends) together: per account, one
   * statement that updates the messages and deletes the finished jobs. When that is all there
   * is to write (messages accepted, their jobs done, nothing for the observer; the sandbox's
   * simulated reports are queued by the same statement), each such statement is atomic on its
   * own and no transaction is opened (its BEGIN and COMMIT would be two more round trips, and
   * the reports' INSERT a third); else all is recorded in one transaction. Should the group
   * fail, the Batcher records each attempt alone, so that one cannot fail another.
   */
  private async recordMany(plans: RecordPlan[]): Promise<MessageRow[][]> {
    // One account's plans only: statements of two accounts without a transaction could leave the
    // first recorded when the second fails, and the retry one at a time would then answer the
    // first's callers as if nothing had changed.
    const oneAccount = plans.every((p) => p.send.accountId === plans[0]!.send.accountId);
    if (oneAccount && plans.every(onlyAccepted)) return this.recordAccepted(plans);
    return this.deps.db.transaction().execute((trx) => this.recordIn(trx, plans));
  }

  /**
   * `recordMany` for one account's plans that are `onlyAccepted`: one statement, no transaction,
   * which also queues the simulated reports of the messages it moves on (as `afterChange` does).
   */
  private async recordAccepted(plans: RecordPlan[]): Promise<MessageRow[][]> {
    const accountId = plans[0]!.send.accountId;
    const reports: { messageId: string; report: NewJob }[] = [];
    for (const p of plans)
      for (const [id, outcome] of p.outcomes)
        for (const report of simulatedReports(accountId, id, outcome))
          reports.push({ messageId: id, report });
    const jobs = this.deps.jobs.rowsOf(reports.map((r) => r.report));
    const changed = await this.deps.messages.recordOutcomes(
      this.deps.db,
      accountId,
      plans.flatMap((p) => p.records),
      this.deps.clock.now(),
      plans.map(heldJob),
      reports.map((r, i) => ({ messageId: r.messageId, job: jobs[i]! })),
    );
    return changedRows(plans, new Map(changed.map((c) => [c.row.id, c.row])));
  }

  /**
   * The answers of many attempts recorded in the caller's transaction (see `recordMany`):
   * answers, for each plan, its messages whose row changed.
   */
  private async recordIn(trx: Tx, plans: RecordPlan[]): Promise<MessageRow[][]> {
    const now = this.deps.clock.now();
    const changedById = new Map<string, MessageRow>();
    for (const [accountId, group] of groupBy(plans, (p) => p.send.accountId)) {
      const outcomes = new Map<string, SendOutcome>();
      for (const p of group) for (const [id, o] of p.outcomes) outcomes.set(id, o);
      const changed = await this.deps.messages.recordOutcomes(
        trx,
        accountId,
        group.flatMap((p) => p.records),
        now,
        group.filter((p) => p.retry === null && !p.partial).map(heldJob),
      );
      await this.afterChange(trx, accountId, changed, outcomes);
      for (const c of changed) changedById.set(c.row.id, c.row);
    }
    for (const p of plans) {
      if (p.retry === null || p.partial) continue;
      await this.deps.jobs.settle(trx, p.send.accountId, p.send.jobId, p.send.lease, {
        done: false,
        retryAt: new Date(now.getTime() + p.retry.afterMs),
        error: p.retry.error,
        // The next attempts go to the connection this one used, or to none.
        ...(p.send.connectionId !== undefined
          ? { payload: { connection_id: p.send.connectionId } }
          : {}),
        handedNone: p.handedNone ?? false,
      });
    }
    return changedRows(plans, changedById);
  }

  /** Marks these messages failed if still queued, with their events, in the caller's transaction. */
  async recordFailures(trx: Tx, accountId: string, ids: string[], reason: string): Promise<void> {
    const now = this.deps.clock.now();
    const changed = await this.deps.messages.recordOutcomes(
      trx,
      accountId,
      ids.map((id) => ({ id, status: 'failed' as const, reason })),
      now,
    );
    await this.afterChange(trx, accountId, changed, new Map());
  }

  /** Events, the sandbox's simulated reports and the observer, in the recording transaction. */
  private async afterChange(
    trx: Tx,
    accountId: string,
    changed: { row: MessageRow; from: MessageRow['status'] }[],
    outcomes: Map<string, SendOutcome>,
  ): Promise<void> {
    const reports: NewJob[] = [];
    for (const { row } of changed) {
      if (row.status === 'failed') {
        await this.deps.outbox.record(trx, accountId, 'message.failed', toMessage(row));
      }
      const outcome = outcomes.get(row.id);
      if (outcome) reports.push(...simulatedReports(accountId, row.id, outcome));
    }
    await this.deps.jobs.enqueueMany(trx, reports);
    if (changed.length > 0) await this.deps.observer.outboundChanged(trx, accountId, changed);
  }
}
