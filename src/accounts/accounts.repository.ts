import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import { paged, type Paged } from '../db/paged.js';
import type { PageRequest } from '../http/pagination.js';
import type { AccountsTable, Plan } from '../db/schema.js';

export type AccountRow = Selectable<AccountsTable>;

export interface KeyOwner {
  keyId: string;
  accountId: string;
  plan: Plan;
  rateLimitPerMinute: number | null;
}

/** Accounts and keys are the one place where lookups start without an account: they find it. */
export class AccountsRepository {
  constructor(private readonly db: Db) {}

  async insert(trx: Tx | Db, row: AccountRow): Promise<void> {
    await trx.insertInto('accounts').values(row).execute();
  }

  async find(id: string, trx: Tx | Db = this.db): Promise<AccountRow | undefined> {
    return trx.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Every account, newest first (the operator's list: accounts are not scoped to one). */
  async list(page: PageRequest): Promise<Paged<AccountRow>> {
    return paged(this.db.selectFrom('accounts'), page, (q) =>
      q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc'),
    );
  }

  async count(trx: Tx | Db = this.db): Promise<number> {
    const row = await trx
      .selectFrom('accounts')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async update(
    id: string,
    patch: Partial<Pick<AccountRow, 'name' | 'plan' | 'rate_limit_per_minute'>>,
    now: Date,
  ): Promise<AccountRow | undefined> {
    return this.db
      .updateTable('accounts')
      .set({ ...patch, updated_at: now })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async insertKey(
    trx: Tx | Db,
    row: {
      account_id: string;
      id: string;
      name: string | null;
      key_hash: string;
      created_at: Date;
    },
  ): Promise<void> {
    await trx.insertInto('api_keys').values(row).execute();
  }

  /** Revokes a key (of `accountId` only, when given); false when there is no such key. */
  async revokeKey(id: string, now: Date, accountId?: string): Promise<boolean> {
    let update = this.db
      .updateTable('api_keys')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null);
    if (accountId !== undefined) update = update.where('account_id', '=', accountId);
    const result = await update.executeTakeFirst();
    if (result.numUpdatedRows > 0n) return true;
    let exists = this.db.selectFrom('api_keys').select('id').where('id', '=', id);
    if (accountId !== undefined) exists = exists.where('account_id', '=', accountId);
    return (await exists.executeTakeFirst()) !== undefined;
  }

  /** These keys as they stand: revoked or not, and their account's plan (missing: deleted). */
  async keyStates(ids: string[]): Promise<{ id: string; revoked: boolean; plan: Plan }[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('api_keys as k')
      .innerJoin('accounts as a', 'a.id', 'k.account_id')
      .select(['k.id', 'k.revoked_at', 'a.plan'])
      .where('k.id', '=', sql<string>`ANY(${ids}::text[])`)
      .execute();
    return rows.map((r) => ({ id: r.id, revoked: r.revoked_at !== null, plan: r.plan }));
  }

  /** The account's live keys, newest first (their hashes stay here). */
  async listKeys(
    accountId: string,
  ): Promise<{ id: string; name: string | null; created_at: Date }[]> {
    return this.db
      .selectFrom('api_keys')
      .select(['id', 'name', 'created_at'])
      .where('account_id', '=', accountId)
      .where('revoked_at', 'is', null)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
  }

  /**
   * The owners of any number of keys in one round trip (the API's concurrent requests are
   * authenticated together), aligned with `keyHashes`: live, so a revoke or plan change applies
   * to the very next request.
   */
  async findKeyOwners(keyHashes: readonly string[]): Promise<(KeyOwner | undefined)[]> {
    const rows = await this.db
      .selectFrom('api_keys as k')
      .innerJoin('accounts as a', 'a.id', 'k.account_id')
      .select([
        'k.key_hash as keyHash',
        'k.id as keyId',
        'k.account_id as accountId',
        'a.plan',
        'a.rate_limit_per_minute',
      ])
      .where('k.key_hash', '=', sql<string>`ANY(${[...keyHashes]}::text[])`)
      .where('k.revoked_at', 'is', null)
      .execute();
    const byHash = new Map(
      rows.map((row) => [
        row.keyHash,
        {
          keyId: row.keyId,
          accountId: row.accountId,
          plan: row.plan,
          rateLimitPerMinute: row.rate_limit_per_minute,
        },
      ]),
    );
    return keyHashes.map((hash) => byHash.get(hash));
  }
}
