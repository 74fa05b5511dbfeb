import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { WebhookAttemptsTable, WebhooksTable } from '../db/schema.js';
import { paged } from '../db/paged.js';
import type { PageRequest } from '../http/pagination.js';

export type WebhookRow = Selectable<WebhooksTable>;
export type AttemptRow = Selectable<WebhookAttemptsTable>;

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
  async delete(trx: Tx, accountId: string, id: string): Promise<boolean> {
    const r = await trx
      .deleteFrom('webhooks')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (r.numDeletedRows === 0n) return false;
    await lockDeliveries(trx, accountId, id);
    await trx
      .deleteFrom('webhook_deliveries')
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', id)
      .execute();
    await trx
      .deleteFrom('webhook_attempts')
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', id)
      .execute();
    return true;
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
