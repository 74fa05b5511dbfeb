import type { Selectable } from 'kysely';
import type { Db } from '../db/database.js';
import { containsPattern, prefixPattern } from '../db/like.js';
import { paged, type Paged } from '../db/paged.js';
import type { CannedResponsesTable } from '../db/schema.js';
import type { PageRequest } from '../http/pagination.js';

export type CannedResponseRow = Selectable<CannedResponsesTable>;

export class CannedResponsesRepository {
  constructor(private readonly db: Db) {}

  async insert(row: CannedResponseRow): Promise<void> {
    await this.db.insertInto('canned_responses').values(row).execute();
  }

  async find(accountId: string, id: string): Promise<CannedResponseRow | undefined> {
    return this.db
      .selectFrom('canned_responses')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * The account's canned responses in shortcut order; with `q`, those whose shortcut starts with
   * it or whose content holds it (ignoring case).
   */
  async list(
    accountId: string,
    q: string | null,
    page: PageRequest,
  ): Promise<Paged<CannedResponseRow>> {
    let filtered = this.db.selectFrom('canned_responses').where('account_id', '=', accountId);
    if (q !== null)
      filtered = filtered.where((eb) =>
        eb.or([
          eb('shortcut', 'ilike', prefixPattern(q)),
          eb('content', 'ilike', containsPattern(q)),
        ]),
      );
    return paged(filtered, page, (query) => query.selectAll().orderBy('shortcut').orderBy('id'));
  }

  /** The changed row, or undefined when there is none with this id. */
  async update(
    accountId: string,
    id: string,
    changes: { shortcut?: string; content?: string },
    now: Date,
  ): Promise<CannedResponseRow | undefined> {
    return this.db
      .updateTable('canned_responses')
      .set({ ...changes, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('canned_responses')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
