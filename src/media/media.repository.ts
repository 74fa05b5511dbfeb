import type { Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { MediaTable } from '../db/schema.js';

export type MediaRow = Selectable<MediaTable>;

/** What is known of a file without its bytes. */
export type MediaMeta = Omit<MediaRow, 'bytes'>;

/** Files the service keeps (inbound media from providers, uploads), per account. */
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

  /** Keeps an upload under its new id, in the caller's transaction. */
  async insert(trx: Tx, row: MediaRow): Promise<void> {
    await trx.insertInto('media').values(row).execute();
  }

  /** The file's type, name and size, without reading its bytes. */
  async findMeta(accountId: string, id: string): Promise<MediaMeta | undefined> {
    return this.db
      .selectFrom('media')
      .select(['account_id', 'id', 'content_type', 'filename', 'size', 'created_at'])
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
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
