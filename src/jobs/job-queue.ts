import { sql, type Insertable, type RawBuilder } from 'kysely';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/database.js';
import type { JobsTable } from '../db/schema.js';
import { newId } from '../ids.js';

/** Job kind → its payload: ids and a version, never copies of data. */
export interface JobPayloads {
  'sandbox.status': {
    v: 1;
    message_id: string;
    status: 'delivered' | 'read' | 'failed';
    reason?: string;
  };
  /** Starts a scheduled broadcast at its time, then sends it batch by batch. */
  'broadcast.send': { v: 1; broadcast_id: string };
  /**
   * Hands queued messages to their provider (one API send, or one broadcast batch), only through
   * the connection they were queued for (null: the sandbox) once that is known.
   */
  'message.send': {
    v: 1;
    message_ids: string[];
    connection_id?: string | null;
    /** The broadcast whose batch these messages are, which waits for them to be taken. */
    broadcast_id?: string;
  };
  /** Processes one stored provider webhook (inbound_webhooks row) of the job's account. */
  'channel.inbound': { v: 1; webhook_id: string };
  /**
   * Looks up the profile name of a new Messenger or Instagram sender whose lookup failed while
   * their first message was recorded: the connection, and the sender's id (PSID, IGSID) there.
   */
  'contact.profile': { v: 1; connection_id: string; identity: string };
  /** Deletes what is left of a deleted webhook: its deliveries and attempt log, in batches. */
  'webhook.purge': { v: 1; webhook_id: string };
}
export type JobKind = keyof JobPayloads;

/** When a job falls due, and whether its caller holds it already (see `JobQueue.enqueueMany`). */
export interface JobTiming {
  delayMs?: number;
  runAt?: Date;
  leasedUntil?: Date;
}

/** A job to write (see `JobQueue.enqueueMany`). */
export type NewJob = {
  accountId: string;
  kind: JobKind;
  payload: JobPayloads[JobKind];
} & JobTiming;

/** A job its caller has claimed, as long as `locked_until` still holds the caller's lease. */
export interface HeldJob {
  accountId: string;
  id: string;
  lease: Date;
}

/**
 * The DELETE of finished jobs their callers hold: a job whose lease was taken over meanwhile
 * is left alone. A statement of its own, or the last part of a caller's (after its WITH).
 */
export function deleteHeldJobs(jobs: HeldJob[]): RawBuilder<unknown> {
  return sql`
    DELETE FROM jobs j
    USING unnest(${jobs.map((j) => j.accountId)}::text[], ${jobs.map((j) => j.id)}::text[],
                 ${jobs.map((j) => j.lease)}::timestamptz[]) AS v(account_id, id, locked_until)
    WHERE j.account_id = v.account_id AND j.id = v.id AND j.locked_until = v.locked_until`;
}

/** Writes jobs inside the caller's transaction, so a job exists exactly when its cause committed. */
export class JobQueue {
  constructor(private readonly clock: Clock) {}

  /**
   * Many jobs in one statement (a broadcast batch queues thousands); answers their ids in order.
   * Each falls due at `runAt`, or `delayMs` from now (default: now). `leasedUntil` writes it
   * already claimed by the caller (its first attempt), so no runner takes it before then:
   * should the caller die, a runner picks it up when the lease ends. Such a job is due when its
   * lease ends: runners scan due jobs in `run_at` order, and the many short-lived jobs of a busy
   * send path (written, then deleted a few milliseconds later) then lie beyond the scan instead
   * of in front of every due job until they are vacuumed.
   */
  async enqueueMany(trx: Tx, jobs: NewJob[]): Promise<string[]> {
    if (jobs.length === 0) return [];
    const rows = this.rowsOf(jobs);
    await trx.insertInto('jobs').values(rows).execute();
    return rows.map((r) => r.id);
  }

  /**
   * The rows `enqueueMany` writes, for a caller that writes them in a statement of its own (with
   * the rows they are about); ids in order.
   */
  rowsOf(jobs: NewJob[]): Insertable<JobsTable>[] {
    const now = this.clock.now();
    return jobs.map((j) => ({
      account_id: j.accountId,
      id: newId('job'),
      kind: j.kind,
      payload: JSON.stringify(j.payload),
      run_at: j.runAt ?? j.leasedUntil ?? new Date(now.getTime() + (j.delayMs ?? 0)),
      created_at: now,
      // Every row names the same columns: a multi-row insert takes one column list.
      locked_until: j.leasedUntil ?? null,
      attempts: j.leasedUntil ? 1 : 0,
    }));
  }

  /** One job (see `enqueueMany`); answers its id. */
  async enqueue<K extends JobKind>(
    trx: Tx,
    accountId: string,
    kind: K,
    payload: JobPayloads[K],
    timing: JobTiming = {},
  ): Promise<string> {
    const [id] = await this.enqueueMany(trx, [{ accountId, kind, payload, ...timing }]);
    return id!;
  }

  /** Deletes finished jobs their callers hold (each under its lease), in one statement. */
  async finishMany(trx: Tx | Db, jobs: HeldJob[]): Promise<void> {
    if (jobs.length > 0) await deleteHeldJobs(jobs).execute(trx);
  }

  /**
   * Settles a job its caller holds under `lease` (see `leasedUntil`): deleted when done, else
   * released to run again at `retryAt`. A caller whose lease was taken over changes nothing.
   */
  async settle(
    trx: Tx | Db,
    accountId: string,
    id: string,
    lease: Date,
    next:
      | { done: true }
      | {
          done: false;
          retryAt: Date;
          error: string;
          payload?: Record<string, unknown>;
          /** A send job's attempt ended: none of its messages is with the provider any more. */
          handedNone?: boolean;
        },
  ): Promise<void> {
    if (next.done) {
      await trx
        .deleteFrom('jobs')
        .where('account_id', '=', accountId)
        .where('id', '=', id)
        .where('locked_until', '=', lease)
        .execute();
      return;
    }
    await trx
      .updateTable('jobs')
      .set({
        run_at: next.retryAt,
        locked_until: null,
        last_error: next.error.slice(0, 2000),
        // Fields added to the payload (what the next attempt must know).
        ...(next.payload
          ? { payload: sql<string>`jobs.payload || ${JSON.stringify(next.payload)}::jsonb` }
          : {}),
        ...(next.handedNone ? { handed_upto: '', not_taken: null } : {}),
      })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('locked_until', '=', lease)
      .execute();
  }

  /**
   * Moves a held job's claim to `until`, only while `lease` still holds it; answers whether it
   * did. Due again when the new claim ends, as a claimed job is.
   */
  async extend(db: Db, accountId: string, id: string, lease: Date, until: Date): Promise<boolean> {
    const r = await db
      .updateTable('jobs')
      .set({ locked_until: until, run_at: until })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('locked_until', '=', lease)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }
}
