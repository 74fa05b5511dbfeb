import { sql, type Insertable, type Selectable } from 'kysely';
import type { Db } from '../db/database.js';
import type { InboundWebhooksTable, JobsTable } from '../db/schema.js';
import { deleteHeldJobs, type HeldJob } from '../jobs/job-queue.js';

export type InboundWebhookRow = Selectable<InboundWebhooksTable>;

/** Provider webhooks as received: the signed bytes, kept until processed and after. */
export class InboundWebhooksRepository {
  constructor(private readonly db: Db) {}

  /**
   * Stores webhooks with their processing jobs in one statement (atomic on its own: no
   * transaction's extra round trips on the path that answers Meta).
   */
  async insertWithJobs(rows: InboundWebhookRow[], jobs: Insertable<JobsTable>[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db
      .with('stored', (db) => db.insertInto('inbound_webhooks').values(rows))
      .insertInto('jobs')
      .values(jobs)
      .execute();
  }

  /** Jobs that follow from processing a webhook (a sender's profile to look up later). */
  async insertJobs(jobs: Insertable<JobsTable>[]): Promise<void> {
    if (jobs.length > 0) await this.db.insertInto('jobs').values(jobs).execute();
  }

  async find(accountId: string, id: string): Promise<InboundWebhookRow | undefined> {
    return this.db
      .selectFrom('inbound_webhooks')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** The stored webhooks with these ids (of their accounts); absent ones are missing. */
  async findMany(keys: { accountId: string; id: string }[]): Promise<InboundWebhookRow[]> {
    if (keys.length === 0) return [];
    const rows = await sql<InboundWebhookRow>`
      SELECT w.* FROM inbound_webhooks w
      JOIN unnest(${keys.map((k) => k.accountId)}::text[], ${keys.map((k) => k.id)}::text[])
        AS k(account_id, id) ON w.account_id = k.account_id AND w.id = k.id`.execute(this.db);
    return rows.rows;
  }

  /**
   * Marks webhooks processed and deletes the finished jobs their processor holds (each under
   * its lease), in one statement.
   */
  async markProcessedMany(
    keys: { accountId: string; id: string }[],
    jobs: HeldJob[],
    now: Date,
  ): Promise<void> {
    if (keys.length === 0) return;
    await sql`
      WITH processed AS (
        UPDATE inbound_webhooks w SET processed_at = ${now}
        FROM unnest(${keys.map((k) => k.accountId)}::text[], ${keys.map((k) => k.id)}::text[])
          AS k(account_id, id)
        WHERE w.account_id = k.account_id AND w.id = k.id
      )
      ${deleteHeldJobs(jobs)}`.execute(this.db);
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
