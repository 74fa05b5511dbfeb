import type { Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { TemplateStatus, TemplatesTable } from '../db/schema.js';
import { paged } from '../db/paged.js';
import type { PageRequest } from '../http/pagination.js';

export type TemplateRow = Selectable<TemplatesTable>;

export class TemplatesRepository {
  constructor(private readonly db: Db) {}

  async insert(trx: Tx | Db, row: TemplateRow): Promise<void> {
    await trx.insertInto('templates').values(row).execute();
  }

  async find(accountId: string, id: string): Promise<TemplateRow | undefined> {
    return this.db
      .selectFrom('templates')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async findByName(
    accountId: string,
    name: string,
    trx: Tx | Db = this.db,
  ): Promise<TemplateRow | undefined> {
    return trx
      .selectFrom('templates')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  async findByProviderId(
    accountId: string,
    providerTemplateId: string,
    trx: Tx | Db = this.db,
  ): Promise<TemplateRow | undefined> {
    return trx
      .selectFrom('templates')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('provider_template_id', '=', providerTemplateId)
      .executeTakeFirst();
  }

  /** Overwrites what the provider decides (status, body, its id…) on one template. */
  async update(
    trx: Tx | Db,
    accountId: string,
    id: string,
    changes: Partial<
      Pick<
        TemplateRow,
        'status' | 'body' | 'category' | 'provider_template_id' | 'rejection_reason'
      >
    >,
    now: Date,
  ): Promise<TemplateRow | undefined> {
    return trx
      .updateTable('templates')
      .set({ ...changes, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async list(
    accountId: string,
    page: PageRequest,
    status?: TemplateStatus,
  ): Promise<{ rows: TemplateRow[]; total: number }> {
    let q = this.db.selectFrom('templates').where('account_id', '=', accountId);
    if (status) q = q.where('status', '=', status);
    return paged(q, page, (q) => q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc'));
  }

  /** The sandbox's verdict: it gives no reason, so none of an earlier verdict is kept. */
  async setStatus(
    accountId: string,
    id: string,
    status: TemplateStatus,
    now: Date,
    trx: Tx | Db = this.db,
  ): Promise<TemplateRow | undefined> {
    return trx
      .updateTable('templates')
      .set({ status, rejection_reason: null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Answers the deleted template's name, or undefined when there was none. */
  async delete(accountId: string, id: string): Promise<string | undefined> {
    const r = await this.db
      .deleteFrom('templates')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning('name')
      .executeTakeFirst();
    return r?.name;
  }
}
