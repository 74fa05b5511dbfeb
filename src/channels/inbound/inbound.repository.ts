import type { Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { InboundWebhooksTable } from '../../db/schema.js';

export type InboundWebhookRow = Selectable<InboundWebhooksTable>;

/** Provider webhooks as received: the signed bytes, kept until processed and after. */
export class InboundWebhooksRepository {
  constructor(private readonly db: Db) {}

  async insertMany(trx: Tx, rows: InboundWebhookRow[]): Promise<void> {
    if (rows.length > 0) await trx.insertInto('inbound_webhooks').values(rows).execute();
  }

  async find(accountId: string, id: string): Promise<InboundWebhookRow | undefined> {
    return this.db
      .selectFrom('inbound_webhooks')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async markProcessed(accountId: string, id: string, now: Date): Promise<void> {
    await this.db
      .updateTable('inbound_webhooks')
      .set({ processed_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .execute();
  }
}
