import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { WebhookAttemptsTable, WebhooksTable } from '../db/schema.js';
import { paged } from '../db/paged.js';
import { deleteInBatches } from '../db/retention.js';
import type { PageRequest } from '../http/pagination.js';

export type WebhookRow = Selectable<WebhooksTable>;
export type AttemptRow = Selectable<WebhookAttemptsTable>;

/** Rows a deleted webhook's purge deletes per statement. */
export const PURGE_BATCH = 5_000;

export class WebhooksRepository {
  constructor(private readonly db: Db) {}

  /** Serialises webhook creation per account, so the per-account cap holds under concurrency. */
  async lockAccount(trx: Tx, accountId: string): Promise<void> {
    await trx.selectFrom('accounts').select('id').where('id', '=', accountId).forUpdate().execute();
  }

  async count(trx: Tx, accountId: string): Promise<number> {
    const r = await trx
      .selectFrom('webhooks')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return Number(r.n);
  }

  async insert(trx: Tx, row: WebhookRow): Promise<void> {
    await trx.insertInto('webhooks').values(row).execute();
  }

  async find(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<WebhookRow | undefined> {
    return trx
      .selectFrom('webhooks')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async listAll(accountId: string): Promise<WebhookRow[]> {
    return this.db
      .selectFrom('webhooks')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  async update(
    trx: Tx,
    accountId: string,
    id: string,
    patch: Partial<
      Pick<WebhookRow, 'events' | 'status' | 'disabled_reason' | 'failing_since' | 'updated_at'>
    >,
  ): Promise<WebhookRow | undefined> {
    return trx
      .updateTable('webhooks')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Removes the webhook with everything queued or logged for it: deliveries stop at once. */
  /**
   * Deletes the webhook; its deliveries and attempt log stay for `purge`, which takes them in
   * batches of their own: a webhook failing for days has millions of rows, and one transaction
   * deleting them all would hold back every account's event streams until it ends (they wait
   * for every transaction older than the events they send).
   */
  async delete(trx: Tx, accountId: string, id: string): Promise<boolean> {
    const r = await trx
      .deleteFrom('webhooks')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /**
   * Deletes a deleted webhook's deliveries, then its attempt log, `batchSize` rows per statement
   * (each its own short transaction). Deliveries are locked in primary-key order, as every
   * multi-row lock on them is (lockDeliveries), and one being recorded right now is skipped:
   * its record finds it or not, and a later purge takes what is left. Answers whether anything
   * is left.
   */
  async purge(accountId: string, webhookId: string, batchSize = PURGE_BATCH): Promise<boolean> {
    await deleteInBatches(
      this.db,
      'webhook_deliveries',
      (limit) => sql`
        SELECT ctid FROM webhook_deliveries
        WHERE account_id = ${accountId} AND webhook_id = ${webhookId}
        ORDER BY account_id, webhook_id, event_id LIMIT ${limit}
        FOR UPDATE SKIP LOCKED`,
      batchSize,
    );
    // After the deliveries: an attempt recorded meanwhile is in the log by now.
    await deleteInBatches(
      this.db,
      'webhook_attempts',
      (limit) => sql`
        SELECT ctid FROM webhook_attempts
        WHERE account_id = ${accountId} AND webhook_id = ${webhookId} LIMIT ${limit}`,
      batchSize,
    );
    const left = await sql<{ left: boolean }>`
      SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE account_id = ${accountId} AND webhook_id = ${webhookId})
          OR EXISTS (SELECT 1 FROM webhook_attempts WHERE account_id = ${accountId} AND webhook_id = ${webhookId})
        AS left`.execute(this.db);
    return left.rows[0]!.left;
  }

  /** Gives up what is still queued for a webhook that no longer takes deliveries. */
  async failPending(trx: Tx, accountId: string, webhookId: string, now: Date): Promise<void> {
    await lockDeliveries(trx, accountId, webhookId);
    await trx
      .updateTable('webhook_deliveries')
      .set({ state: 'failed', locked_until: null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', webhookId)
      .where('state', '=', 'pending')
      .execute();
  }

  async listAttempts(
    accountId: string,
    webhookId: string,
    page: PageRequest,
  ): Promise<{ rows: AttemptRow[]; total: number }> {
    const q = this.db
      .selectFrom('webhook_attempts')
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', webhookId);
    return paged(q, page, (q) => q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc'));
  }

  async findAttempt(
    accountId: string,
    webhookId: string,
    id: string,
  ): Promise<AttemptRow | undefined> {
    return this.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', webhookId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Records an event queued for one webhook only (a test event), due now. */
  async insertEventFor(
    trx: Tx,
    accountId: string,
    webhookId: string,
    event: { id: string; type: string; data: unknown },
    now: Date,
  ): Promise<void> {
    await sql`
      WITH event AS (
        INSERT INTO events (account_id, id, type, data, created_at)
        VALUES (${accountId}, ${event.id}, ${event.type}, ${JSON.stringify(event.data)}, ${now})
      )
      INSERT INTO webhook_deliveries (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at, updated_at)
      VALUES (${accountId}, ${webhookId}, ${event.id}, ${event.type}, 'pending', ${now}, ${now}, ${now})`.execute(
      trx,
    );
  }

  /** Queues (again) the delivery of an event to a webhook, due now; false when the event is gone. */
  async requeue(
    trx: Tx,
    accountId: string,
    webhookId: string,
    eventId: string,
    now: Date,
  ): Promise<boolean> {
    const r = await sql`
      INSERT INTO webhook_deliveries (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at, updated_at)
      SELECT account_id, ${webhookId}, id, type, 'pending', ${now}, ${now}, ${now}
      FROM events WHERE account_id = ${accountId} AND id = ${eventId}
      ON CONFLICT (account_id, webhook_id, event_id)
      DO UPDATE SET state = 'pending', next_attempt_at = ${now}, locked_until = NULL, updated_at = ${now}`.execute(
      trx,
    );
    return (r.numAffectedRows ?? 0n) > 0n;
  }
}

/**
 * Locks a webhook's deliveries in primary-key order, the order every statement that locks many
 * deliveries takes (the dispatcher's grouped bookkeeping included), so two of them never wait
 * on each other in a cycle.
 */
export async function lockDeliveries(trx: Tx, accountId: string, webhookId: string): Promise<void> {
  await trx
    .selectFrom('webhook_deliveries')
    .select('event_id')
    .where('account_id', '=', accountId)
    .where('webhook_id', '=', webhookId)
    .orderBy('event_id')
    .forUpdate()
    .execute();
}
