import type { Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { MessageStatus, MessagesTable } from '../db/schema.js';

export type MessageRow = Selectable<MessagesTable>;

/** Which statuses each target may be reached from: statuses only move forward. */
const FORWARD_FROM: Record<'delivered' | 'read' | 'failed', MessageStatus[]> = {
  delivered: ['sent'],
  read: ['sent', 'delivered'],
  failed: ['sent', 'delivered'],
};

export class MessagesRepository {
  constructor(private readonly db: Db) {}

  async insertMany(trx: Tx, rows: MessageRow[]): Promise<void> {
    if (rows.length > 0) await trx.insertInto('messages').values(rows).execute();
  }

  async find(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<MessageRow | undefined> {
    return trx
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async listForConversation(accountId: string, conversationId: string): Promise<MessageRow[]> {
    return this.db
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /**
   * Moves an outbound message forward in one conditional UPDATE, so concurrent or late updates
   * cannot move it back; undefined when the update changes nothing.
   */
  async advanceStatus(
    trx: Tx,
    accountId: string,
    id: string,
    to: 'delivered' | 'read' | 'failed',
    reason: string | null,
    now: Date,
  ): Promise<{ row: MessageRow; from: MessageStatus } | undefined> {
    const before = await trx
      .selectFrom('messages')
      .select('status')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!before || !FORWARD_FROM[to].includes(before.status)) return undefined;
    const row = await trx
      .updateTable('messages')
      .set({ status: to, failure_reason: to === 'failed' ? reason : null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('direction', '=', 'outbound')
      .returningAll()
      .executeTakeFirst();
    return row ? { row, from: before.status } : undefined;
  }
}
