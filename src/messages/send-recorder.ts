import { sql } from 'kysely';
import type { ChannelProvider, OutboundMessage, SendOutcome } from '../channels/channel.js';
import type { Db, Tx } from '../db/database.js';
import type { HeldJob } from '../jobs/job-queue.js';
import type { MessageRow, OutboundRecord } from './messages.repository.js';
import { finalRecord } from './send-plans.js';

type FinalOutcome = Exclude<SendOutcome, { status: 'retry' }>;

/**
 * At most once towards a provider without an idempotency key (WhatsApp, Messenger, Instagram):
 * a call whose answer was lost (the worker killed mid-batch) cannot be repeated safely. So a
 * send job's attempt keeps, on the job's row, a mark of what it may have handed out
 * (`handed_upto`: its messages in id order up to that id; NULL on a new job: every one), moved
 * ahead before the calls it covers begin, and records the answers as they come (every
 * FLUSH_ANSWERS answers or FLUSH_MS, whichever first) rather than after the whole batch: what is
 * in doubt when the worker dies is the calls under way, the answers of the last moments, and
 * the mark's lead over the calls. A runner
 * that takes the job over (`takeOver`) fails the messages still `queued` under the mark (in doubt:
 * handed out, answer unknown) and sends only the others. Webchat and the sandbox are not tracked:
 * sending them again is harmless, and they are sent again as before.
 */

/** Answers recorded together at most while a batch runs; and how long one waits at most. */
export const FLUSH_ANSWERS = 64;
export const FLUSH_MS = 250;
/**
 * How many messages past the last one handed out the mark is moved (and a first attempt's first
 * mark covers), and how close the calls may come to it before it is moved again: a move (one
 * small update of the job's row) must commit before the calls reach the mark, or they wait. The
 * cost is that up to HAND_OUT_AHEAD messages never handed out may count in doubt should the
 * worker die (besides the calls under way and the answers not yet recorded).
 */
export const HAND_OUT_AHEAD = 128;
const HAND_OUT_LOW = 64;

export const IN_DOUBT_REASON =
  'the outcome of the send is unknown: the worker sending it stopped while the provider had it; it was not sent again to avoid a duplicate';

/** Whether hand-outs to this provider are tracked (a real provider: no idempotency key). */
export function tracksHandOut(provider: ChannelProvider): boolean {
  return provider.name !== 'sandbox' && provider.name !== 'webchat';
}

/** Answers recorded while the batch runs (the job neither finished nor settled by them). */
export interface Flush {
  outcomes: Map<string, SendOutcome>;
  records: OutboundRecord[];
}

/**
 * Moves a held send job's mark to `handedUpTo`, adding `notTaken` to those the provider answered
 * "not now"; one statement of its own. Answers whether the claim still held.
 */
export async function moveMark(
  db: Db,
  job: HeldJob,
  handedUpTo: string,
  notTaken: string[],
): Promise<boolean> {
  const r = await db
    .updateTable('jobs')
    .set({
      handed_upto: handedUpTo,
      ...(notTaken.length > 0
        ? {
            not_taken: sql<string[]>`coalesce(jobs.not_taken, '{}'::text[]) || ${notTaken}::text[]`,
          }
        : {}),
    })
    .where('account_id', '=', job.accountId)
    .where('id', '=', job.id)
    .where('locked_until', '=', job.lease)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/**
 * A runner's attempt at a job it took over (its messages in id order): the messages its last
 * holder may have handed out, whose answer was not recorded, are failed with IN_DOUBT_REASON
 * (by `fail`, with their events), and the job's mark set for this attempt's first calls, in one
 * transaction. Answers the messages left to send and how many the mark covers; null when the
 * claim was lost meanwhile. The mark is read before the messages are locked (the order every
 * recording takes): only the claim's holder moves it, and that is this runner now.
 */
export async function takeOver(
  db: Db,
  job: HeldJob,
  messages: OutboundMessage[],
  fail: (trx: Tx, ids: string[]) => Promise<void>,
): Promise<{ rest: OutboundMessage[]; reserved: number } | null> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('jobs')
      .select(['handed_upto', 'not_taken'])
      .where('account_id', '=', job.accountId)
      .where('id', '=', job.id)
      .where('locked_until', '=', job.lease)
      .executeTakeFirst();
    if (!row) return null;
    const mark = row.handed_upto;
    const notTaken = new Set(row.not_taken ?? []);
    const inDoubt: string[] = [];
    const rest: OutboundMessage[] = [];
    for (const m of messages) {
      const handed = (mark === null || m.messageId <= mark) && !notTaken.has(m.messageId);
      if (handed) inDoubt.push(m.messageId);
      else rest.push(m);
    }
    if (inDoubt.length > 0) await fail(trx, inDoubt);
    const reserved = Math.min(rest.length, HAND_OUT_AHEAD);
    const moved = await trx
      .updateTable('jobs')
      .set({ handed_upto: reserved > 0 ? rest[reserved - 1]!.messageId : '', not_taken: null })
      .where('account_id', '=', job.accountId)
      .where('id', '=', job.id)
      .where('locked_until', '=', job.lease)
      .executeTakeFirst();
    if (moved.numUpdatedRows === 0n) throw new Error('the send job was taken over meanwhile');
    return { rest, reserved };
  });
}

/**
 * One attempt's hand-outs to a tracked provider: the calls (in the messages' id order) ask
 * `mayHandOut` before each one, which waits while the job's mark does not cover it yet. Two
 * writers, one statement at a time each, so that neither waits on the other: the mark, moved
 * ahead of the calls (a small update of the job's row, never beside a renewal of the claim: see
 * `serial`); and the answers given to `answered`, recorded every FLUSH_ANSWERS or FLUSH_MS (a
 * transaction with their events and the broadcast's counts, which may wait on the broadcast's
 * next batch being queued; more answers are then recorded together next time). Once the claim is
 * lost or the mark cannot be moved, no more calls begin: the rest is left to whoever runs the
 * job next. Answers whose recording failed go with the attempt's last record.
 */
export class HandOut {
  private reserved: number;
  private started = 0;
  private narrow: boolean;
  /** Final answers (accepted or failed) not yet recorded; "not now" ones go to `notTaken`. */
  private pending: [string, FinalOutcome][] = [];
  private notTaken: string[] = [];
  private readonly flushed = new Set<string>();
  private readonly rows: MessageRow[] = [];
  private stopped = false;
  private finishing = false;
  /** A recording failed: the answers wait for the attempt's last record. */
  private flushBroken = false;
  private marking: Promise<void> | null = null;
  private flushing: Promise<void> | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private timerFired = false;

  constructor(
    /** The attempt's messages, in id order. */
    private readonly messages: readonly OutboundMessage[],
    /**
     * How many of them the job's mark covers; `narrow` when the mark is a new job's (NULL:
     * every message), to be moved down to what is handed out soon.
     */
    start: { reserved: number; narrow: boolean },
    private readonly io: {
      /** Moves the job's mark (see `moveMark`); false when the claim was lost. */
      mark: (handedUpTo: string, notTaken: string[]) => Promise<boolean>;
      record: (flush: Flush) => Promise<MessageRow[]>;
    },
  ) {
    this.reserved = start.reserved;
    this.narrow = start.narrow;
    this.kick();
  }

  /** Whether the call at `index` may begin (waits for the mark to cover it). */
  async mayHandOut(index: number): Promise<boolean> {
    this.started = Math.max(this.started, index + 1);
    while (index >= this.reserved && !this.stopped) {
      this.kick();
      await this.marking;
    }
    this.kick();
    return !this.stopped;
  }

  answered(id: string, outcome: SendOutcome): void {
    if (outcome.status === 'retry') this.notTaken.push(id);
    else this.pending.push([id, outcome]);
    // A lone message's answer goes with the attempt's last record at once.
    if (this.pending.length === 1 && this.messages.length > 1) this.arm();
    this.kick();
  }

  /** Runs `fn` after the mark's move under way (a renewal of the claim must not race it). */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * After the last call: waits for the writes under way; answers the messages whose answers are
   * recorded (the attempt's last record writes the rest) and the rows that changed.
   */
  async finish(): Promise<{ flushed: Set<string>; rows: MessageRow[] }> {
    this.finishing = true;
    clearTimeout(this.timer);
    await Promise.all([this.marking, this.flushing]);
    return { flushed: this.flushed, rows: this.rows };
  }

  private markDue(): boolean {
    if (this.stopped || this.finishing) return false;
    if (this.narrow || this.notTaken.length > 0) return true;
    return this.reserved < this.messages.length && this.started + HAND_OUT_LOW >= this.reserved;
  }

  private flushDue(): boolean {
    if (this.finishing || this.flushBroken || this.pending.length === 0) return false;
    // Every call begun: the last answers come soon and go with the attempt's last record (a
    // flush then would only make that record wait), unless they take longer than FLUSH_MS.
    if (this.started >= this.messages.length) return this.timerFired;
    return this.pending.length >= FLUSH_ANSWERS || this.timerFired;
  }

  private kick(): void {
    if (!this.marking && this.markDue())
      this.marking = (async () => {
        while (this.markDue()) await this.markOnce();
      })().finally(() => (this.marking = null));
    if (!this.flushing && this.flushDue())
      this.flushing = (async () => {
        while (this.flushDue()) await this.flushOnce();
      })().finally(() => (this.flushing = null));
  }

  private arm(): void {
    clearTimeout(this.timer);
    this.timerFired = false;
    this.timer = setTimeout(() => {
      this.timerFired = true;
      this.kick();
    }, FLUSH_MS);
  }

  private async markOnce(): Promise<void> {
    this.narrow = false;
    const notTaken = this.notTaken.splice(0);
    const upTo = Math.max(
      this.reserved,
      Math.min(this.messages.length, this.started + HAND_OUT_AHEAD),
    );
    try {
      const held = await this.serial(() =>
        this.io.mark(this.messages[upTo - 1]!.messageId, notTaken),
      );
      if (held) this.reserved = upTo;
      else this.stopped = true;
    } catch {
      this.stopped = true;
    }
  }

  private async flushOnce(): Promise<void> {
    const taken = this.pending.splice(0);
    clearTimeout(this.timer);
    this.timerFired = false;
    const records = taken.map(([id, o]) => finalRecord(id, o));
    try {
      this.rows.push(...(await this.io.record({ outcomes: new Map(taken), records })));
      for (const r of records) this.flushed.add(r.id);
    } catch {
      // Left to the attempt's last record.
      this.pending.unshift(...taken);
      this.flushBroken = true;
    }
    if (this.pending.length > 0 && !this.finishing && !this.flushBroken) this.arm();
  }
}
