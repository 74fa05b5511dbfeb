import type { Db, Tx } from './database.js';
import type { Author } from './schema.js';

/**
 * Who a unit of work is for. Every service call carries one: the account that every query is
 * scoped to, and (for an idempotent request) the hook that records the response in the same
 * transaction as the effect it guards.
 */
export interface Scope {
  accountId: string;
  /**
   * Who acts, when a request does: a signed-in user, or null for an API key. Absent when the
   * service acts on its own (a provider's report, a job).
   */
  actor?: Author | null;
  beforeCommit?: (trx: Tx, result: unknown) => Promise<void>;
  /** Told once the transaction that ran `beforeCommit` has committed. */
  afterCommit?: () => void;
}

/** Runs a unit of work in one transaction, then the scope's before-commit hook inside it. */
export class Transactor {
  constructor(readonly db: Db) {}

  async run<T>(scope: Scope, work: (trx: Tx) => Promise<T>): Promise<T> {
    const result = await this.db.transaction().execute(async (trx) => {
      const result = await work(trx);
      if (scope.beforeCommit) await scope.beforeCommit(trx, result);
      return result;
    });
    scope.afterCommit?.();
    return result;
  }
}
