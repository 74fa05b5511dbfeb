import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import type { Channel, MessageStatus } from '../db/schema.js';
import type { MessageRow } from './messages.repository.js';

/**
 * Which statuses each target may be reached from: statuses only move forward. A report may
 * overtake the provider's own answer (delivered while still queued here).
 */
export const FORWARD_FROM: Record<'delivered' | 'read' | 'failed', MessageStatus[]> = {
  delivered: ['queued', 'sent'],
  read: ['queued', 'sent', 'delivered'],
  failed: ['queued', 'sent', 'delivered'],
};

/** The statements of status updates (see StatusService): forward only, under row locks. */
export class StatusRepository {
  /** The conversation on `channel` of the contact with this identity there, if any. */
  async conversationOfIdentity(
    trx: Tx,
    accountId: string,
    channel: Channel,
    identity: string,
  ): Promise<string | undefined> {
    // WhatsApp has no stored identities (its identity is the phone).
    if (channel === 'whatsapp') return undefined;
    const row = await trx
      .selectFrom('contact_identities as i')
      .innerJoin('conversations as c', (j) =>
        j
          .onRef('c.account_id', '=', 'i.account_id')
          .onRef('c.contact_id', '=', 'i.contact_id')
          .onRef('c.channel', '=', 'i.channel'),
      )
      .select('c.id')
      .where('i.account_id', '=', accountId)
      .where('i.channel', '=', channel)
      .where('i.external_id', '=', identity)
      .executeTakeFirst();
    return row?.id;
  }

  /** Outbound messages of a conversation that the provider accepted, in one of `statuses`, created up to `bound`. */
  async acceptedUpTo(
    trx: Tx,
    accountId: string,
    conversationId: string,
    bound: Date,
    statuses: MessageStatus[],
  ): Promise<string[]> {
    const rows = await trx
      .selectFrom('messages')
      .select('id')
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .where('direction', '=', 'outbound')
      .where('provider_message_id', 'is not', null)
      .where('status', 'in', statuses)
      .where('created_at', '<=', bound)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((r) => r.id);
  }

  /**
   * The account's messages with these provider ids, locked (FOR UPDATE, in id order) for their
   * status to be moved. Each id is looked up by its unique index on its own, a plan that holds
   * whatever the statistics say.
   */
  async lockByProviderIds(
    trx: Tx,
    accountId: string,
    providerMessageIds: string[],
  ): Promise<MessageRow[]> {
    if (providerMessageIds.length === 0) return [];
    const rows = await sql<MessageRow>`
      WITH wanted AS MATERIALIZED (
        SELECT DISTINCT m.id FROM unnest(${providerMessageIds}::text[]) AS p(provider_message_id)
        CROSS JOIN LATERAL (
          SELECT id FROM messages
          WHERE account_id = ${accountId} AND provider_message_id = p.provider_message_id
          OFFSET 0
        ) m
      )
      SELECT l.* FROM (SELECT id FROM wanted ORDER BY id) w
      CROSS JOIN LATERAL (
        SELECT * FROM messages WHERE account_id = ${accountId} AND id = w.id FOR UPDATE
      ) l`.execute(trx);
    return rows.rows;
  }

  /** The account's messages with these ids, locked (FOR UPDATE, in id order) as lockByProviderIds. */
  async lockByIds(trx: Tx, accountId: string, ids: string[]): Promise<MessageRow[]> {
    if (ids.length === 0) return [];
    const rows = await sql<MessageRow>`
      SELECT l.* FROM (SELECT DISTINCT id FROM unnest(${ids}::text[]) AS w(id) ORDER BY id) w
      CROSS JOIN LATERAL (
        SELECT * FROM messages WHERE account_id = ${accountId} AND id = w.id FOR UPDATE
      ) l`.execute(trx);
    return rows.rows;
  }

  /** New statuses (and failure reasons) of messages the caller holds locked; their rows now. */
  async setStatuses(
    trx: Tx,
    accountId: string,
    changes: { id: string; status: MessageStatus; reason: string | null }[],
    now: Date,
  ): Promise<MessageRow[]> {
    if (changes.length === 0) return [];
    const rows = await sql<MessageRow>`
      UPDATE messages m SET status = c.status, failure_reason = c.reason, updated_at = ${now}
      FROM unnest(${changes.map((c) => c.id)}::text[], ${changes.map((c) => c.status)}::text[],
                  ${changes.map((c) => c.reason)}::text[]) AS c(id, status, reason)
      WHERE m.account_id = ${accountId} AND m.id = c.id
      RETURNING m.*`.execute(trx);
    return rows.rows;
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
