import type { Selectable } from 'kysely';
import type { Db } from '../db/database.js';
import type { MediaTable } from '../db/schema.js';

export type MediaRow = Selectable<MediaTable>;

/** Files the service keeps (inbound media from providers), per account. */
export class MediaRepository {
  constructor(private readonly db: Db) {}

  /** Keeps the file under its id; a second insert of one id (a retried job) changes nothing. */
  async insertOnce(row: MediaRow): Promise<void> {
    await this.db
      .insertInto('media')
      .values(row)
      .onConflict((oc) => oc.columns(['account_id', 'id']).doNothing())
      .execute();
  }

  async exists(accountId: string, id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('media')
      .select('id')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  async find(accountId: string, id: string): Promise<MediaRow | undefined> {
    return this.db
      .selectFrom('media')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }
}
