import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { BroadcastAudience, BroadcastStatus, BroadcastsTable } from '../db/schema.js';
import { offsetOf, type PageRequest } from '../http/pagination.js';

export type BroadcastRow = Selectable<BroadcastsTable>;

export type StatsDelta = Partial<
  Record<'sent' | 'delivered' | 'read' | 'replied' | 'failed', number>
>;

export class BroadcastsRepository {
  constructor(private readonly db: Db) {}

  async insert(trx: Tx, row: BroadcastRow): Promise<void> {
    await trx
      .insertInto('broadcasts')
      .values({
        ...row,
        audience: JSON.stringify(row.audience),
        message: JSON.stringify(row.message),
      })
      .execute();
  }

  async find(accountId: string, id: string): Promise<BroadcastRow | undefined> {
    return this.db
      .selectFrom('broadcasts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async lock(trx: Tx, accountId: string, id: string): Promise<BroadcastRow | undefined> {
    return trx
      .selectFrom('broadcasts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
  }

  async update(
    trx: Tx,
    accountId: string,
    id: string,
    patch: Partial<Omit<BroadcastRow, 'account_id' | 'id' | 'audience' | 'message'>>,
  ): Promise<BroadcastRow> {
    return trx
      .updateTable('broadcasts')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async list(
    accountId: string,
    status: BroadcastStatus | undefined,
    page: PageRequest,
  ): Promise<{ rows: BroadcastRow[]; total: number }> {
    let q = this.db.selectFrom('broadcasts').where('account_id', '=', accountId);
    if (status) q = q.where('status', '=', status);
    const [rows, count] = await Promise.all([
      q
        .selectAll()
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(page.limit)
        .offset(offsetOf(page))
        .execute(),
      q.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.n) };
  }

  /** Adds to the live counters; each message moves each counter at most once (statuses only move forward). */
  async addStats(
    trx: Tx,
    accountId: string,
    id: string,
    delta: StatsDelta,
    now: Date,
  ): Promise<void> {
    await trx
      .updateTable('broadcasts')
      .set((eb) => ({
        sent: eb('sent', '+', delta.sent ?? 0),
        delivered: eb('delivered', '+', delta.delivered ?? 0),
        read: eb('read', '+', delta.read ?? 0),
        replied: eb('replied', '+', delta.replied ?? 0),
        failed: eb('failed', '+', delta.failed ?? 0),
        updated_at: now,
      }))
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .execute();
  }

  /**
   * The next audience batch in contact-id order: contacts that existed when sending started
   * (the audience is resolved then), after the cursor.
   */
  async nextAudienceBatch(
    trx: Tx,
    accountId: string,
    audience: BroadcastAudience,
    startedAt: Date,
    cursor: string | null,
    limit: number,
  ): Promise<{ id: string }[]> {
    let q = trx
      .selectFrom('contacts')
      .select(['id'])
      .where('account_id', '=', accountId)
      .where('created_at', '<=', startedAt);
    if (cursor) q = q.where('id', '>', cursor);
    if (audience.tags) q = q.where(sql<boolean>`tags && ${audience.tags}::text[]`);
    if (audience.lifecycle_stage) q = q.where('lifecycle_stage', '=', audience.lifecycle_stage);
    return q.orderBy('id').limit(limit).execute();
  }

  /**
   * Claims recipients; returns only those not already claimed, so nobody is messaged twice, each
   * with the row's ctid, by which `recordOutcomes` finds it again later in the transaction.
   */
  async claimRecipients(
    trx: Tx,
    accountId: string,
    broadcastId: string,
    contactIds: string[],
    now: Date,
  ): Promise<Map<string, string>> {
    if (contactIds.length === 0) return new Map();
    const rows = await trx
      .insertInto('broadcast_recipients')
      .values(
        contactIds.map((contact_id) => ({
          account_id: accountId,
          broadcast_id: broadcastId,
          contact_id,
          created_at: now,
        })),
      )
      .onConflict((oc) => oc.columns(['account_id', 'broadcast_id', 'contact_id']).doNothing())
      .returning(['contact_id', sql<string>`ctid::text`.as('ctid')])
      .execute();
    return new Map(rows.map((r) => [r.contact_id, r.ctid]));
  }

  /**
   * The outcome of each recipient claimed in this transaction, found by ctid: rows this
   * transaction inserted cannot move under it, and a TID scan cannot be misplanned on a table
   * whose statistics still describe it as empty (as broadcast_recipients is while a large first
   * broadcast fills it).
   *
   * The account and broadcast are checked with IS NOT DISTINCT FROM (the same test for these
   * non-null keys) because no index can serve it: written as `=`, the cached generic plan, which
   * estimates one row for the broadcast on a table without statistics, scans every recipient of
   * the broadcast so far through the primary key for each batch, and a 100,000-recipient fan-out
   * slowed from thousands to about 200 recipients a second.
   */
  async recordOutcomes(
    trx: Tx,
    accountId: string,
    broadcastId: string,
    outcomes: {
      ctid: string;
      conversationId: string | null;
      messageId: string | null;
      failureReason: string | null;
    }[],
  ): Promise<void> {
    if (outcomes.length === 0) return;
    await sql`
      UPDATE broadcast_recipients r
      SET conversation_id = o.conversation_id, message_id = o.message_id, failure_reason = o.failure_reason
      FROM unnest(${outcomes.map((o) => o.ctid)}::tid[], ${outcomes.map((o) => o.conversationId)}::text[],
                  ${outcomes.map((o) => o.messageId)}::text[], ${outcomes.map((o) => o.failureReason)}::text[])
        AS o(ctid, conversation_id, message_id, failure_reason)
      WHERE r.ctid = o.ctid
        AND (r.account_id, r.broadcast_id) IS NOT DISTINCT FROM (${accountId}, ${broadcastId})`.execute(
      trx,
    );
  }

  /** Marks the first reply on a conversation for every broadcast awaiting one there; returns their ids. */
  async markReplied(
    trx: Tx,
    accountId: string,
    conversationIds: string[],
    now: Date,
  ): Promise<string[]> {
    if (conversationIds.length === 0) return [];
    const rows = await trx
      .updateTable('broadcast_recipients')
      .set({ replied_at: now })
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', (eb) => eb.fn.any(eb.val(conversationIds)))
      .where('replied_at', 'is', null)
      .where('message_id', 'is not', null)
      .returning('broadcast_id')
      .execute();
    return rows.map((r) => r.broadcast_id);
  }
}
