import type { Clock } from '../clock.js';
import type { Db } from '../db/database.js';
import { NotFound } from '../errors.js';

/** A job whose retries ran out, as `switchboard jobs dead` lists it. */
export interface DeadJob {
  id: string;
  account_id: string;
  kind: string;
  payload: unknown;
  attempts: number;
  died_at: string;
  last_error: string | null;
  created_at: string;
}

/**
 * The operator's view of dead jobs: listing them across accounts (an operator's tool, not an
 * account's API, so the account is a filter rather than the scope) and putting one back.
 */
export class DeadJobs {
  constructor(private readonly deps: { db: Db; clock: Clock }) {}

  /** Newest deaths first. */
  async list(opts: { accountId?: string; limit: number }): Promise<DeadJob[]> {
    let q = this.deps.db
      .selectFrom('jobs')
      .select([
        'id',
        'account_id',
        'kind',
        'payload',
        'attempts',
        'dead_at',
        'last_error',
        'created_at',
      ])
      .where('dead_at', 'is not', null);
    if (opts.accountId !== undefined) q = q.where('account_id', '=', opts.accountId);
    const rows = await q.orderBy('dead_at', 'desc').orderBy('id').limit(opts.limit).execute();
    return rows.map((r) => ({
      id: r.id,
      account_id: r.account_id,
      kind: r.kind,
      payload: r.payload,
      attempts: r.attempts,
      died_at: r.dead_at!.toISOString(),
      last_error: r.last_error,
      created_at: r.created_at.toISOString(),
    }));
  }

  /**
   * Puts a dead job back in the queue, due now, with a fresh retry schedule. It runs as any job
   * does: a handler finds what it worked on in its final state and does nothing more (a
   * broadcast that ended `failed` stays failed).
   */
  async retry(id: string): Promise<{ id: string; kind: string; account_id: string }> {
    const row = await this.deps.db
      .updateTable('jobs')
      .set({
        dead_at: null,
        settling: false,
        attempts: 0,
        locked_until: null,
        run_at: this.deps.clock.now(),
      })
      .where('id', '=', id)
      .where('dead_at', 'is not', null)
      .returning(['id', 'kind', 'account_id'])
      .executeTakeFirst();
    if (!row) throw new NotFound('dead job', id);
    return row;
  }
}
