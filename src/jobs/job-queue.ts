import type { Clock } from '../clock.js';
import type { Tx } from '../db/database.js';
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
  /** Processes one stored provider webhook (inbound_webhooks row) of the job's account. */
  'channel.inbound': { v: 1; webhook_id: string };
}
export type JobKind = keyof JobPayloads;

/** Writes jobs inside the caller's transaction, so a job exists exactly when its cause committed. */
export class JobQueue {
  constructor(private readonly clock: Clock) {}

  /** Many jobs in one statement (a broadcast batch queues thousands). */
  async enqueueMany(
    trx: Tx,
    jobs: { accountId: string; kind: JobKind; payload: JobPayloads[JobKind]; delayMs?: number }[],
  ): Promise<void> {
    if (jobs.length === 0) return;
    const now = this.clock.now();
    await trx
      .insertInto('jobs')
      .values(
        jobs.map((j) => ({
          account_id: j.accountId,
          id: newId('job'),
          kind: j.kind,
          payload: JSON.stringify(j.payload),
          run_at: new Date(now.getTime() + (j.delayMs ?? 0)),
          created_at: now,
        })),
      )
      .execute();
  }

  async enqueue<K extends JobKind>(
    trx: Tx,
    accountId: string,
    kind: K,
    payload: JobPayloads[K],
    /** When it falls due: at `runAt`, or `delayMs` from now (default: now). */
    opts: { delayMs?: number; runAt?: Date } = {},
  ): Promise<string> {
    const now = this.clock.now();
    const id = newId('job');
    await trx
      .insertInto('jobs')
      .values({
        account_id: accountId,
        id,
        kind,
        payload: JSON.stringify(payload),
        run_at: opts.runAt ?? new Date(now.getTime() + (opts.delayMs ?? 0)),
        created_at: now,
      })
      .execute();
    return id;
  }
}
