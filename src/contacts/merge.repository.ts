import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import {
  CONTACT_COLUMNS,
  IDENTITIES,
  type ContactRecord,
  type ContactRow,
} from './contact-columns.js';

/**
 * What a merge of two contacts moves, in the merge's transaction: the contacts and their
 * conversations locked, one contact's belongings moved to the other, twin conversations folded.
 */
export class ContactMergeRepository {
  /**
   * These contacts locked for a merge (FOR UPDATE, in id order), with their identities. The
   * identities are read by a statement of their own once the locks are held: a subquery of the
   * locking statement would still see them as they were before a merge it waited for moved some
   * in (READ COMMITTED re-reads only the locked rows), and the one-identity-per-channel check
   * would then pass on stale rows.
   */
  async lockForMerge(
    trx: Tx,
    accountId: string,
    ids: readonly string[],
  ): Promise<Map<string, ContactRecord>> {
    const rows = await trx
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .where('account_id', '=', accountId)
      .where('id', 'in', [...ids])
      .orderBy('id')
      .forUpdate()
      .execute();
    if (rows.length === 0) return new Map();
    const identities = await trx
      .selectFrom('contact_identities')
      .select(['contact_id', 'channel', 'external_id'])
      .where('account_id', '=', accountId)
      .where(
        'contact_id',
        'in',
        rows.map((r) => r.id),
      )
      .execute();
    return new Map(
      rows.map((r) => [
        r.id,
        {
          ...r,
          identities: identities
            .filter((i) => i.contact_id === r.id)
            .map((i) => ({ channel: i.channel, id: i.external_id })),
        },
      ]),
    );
  }

  /** The channels on which these contacts have a conversation, per contact; the rows locked. */
  async lockConversationChannels(
    trx: Tx,
    accountId: string,
    contactIds: readonly string[],
  ): Promise<{ id: string; contact_id: string; channel: Channel }[]> {
    return trx
      .selectFrom('conversations')
      .select(['id', 'contact_id', 'channel'])
      .where('account_id', '=', accountId)
      .where('contact_id', 'in', [...contactIds])
      .orderBy('id')
      .forUpdate()
      .execute();
  }

  /**
   * Moves one contact's identities and conversations (with their messages and notes) to
   * another; for a merge, after both are locked and checked not to share a channel.
   */
  async moveBelongings(trx: Tx, accountId: string, from: string, to: string): Promise<void> {
    await trx
      .updateTable('contact_identities')
      .set({ contact_id: to })
      .where('account_id', '=', accountId)
      .where('contact_id', '=', from)
      .execute();
    await trx
      .updateTable('conversations')
      .set({ contact_id: to })
      .where('account_id', '=', accountId)
      .where('contact_id', '=', from)
      .execute();
  }

  /**
   * Moves the messages, notes and broadcast replies of conversation `from` into `into` (the same
   * person's, on the same channel) and deletes `from`; `into` keeps the later inbound time, and
   * is open if either was (a question asked in `from` must not vanish from the open inbox). Its
   * assignee stays. Both conversations are locked by the caller.
   */
  async foldConversation(
    trx: Tx,
    accountId: string,
    from: string,
    into: string,
    now: Date,
  ): Promise<void> {
    for (const table of ['messages', 'notes', 'broadcast_recipients'] as const) {
      await trx
        .updateTable(table)
        .set({ conversation_id: into })
        .where('account_id', '=', accountId)
        .where('conversation_id', '=', from)
        .execute();
    }
    const gone = await trx
      .deleteFrom('conversations')
      .where('account_id', '=', accountId)
      .where('id', '=', from)
      .returning(['last_inbound_at', 'status'])
      .executeTakeFirst();
    await trx
      .updateTable('conversations')
      .set((eb) => ({
        // GREATEST ignores a NULL.
        last_inbound_at: sql<Date | null>`greatest(${eb.ref('last_inbound_at')}, ${gone?.last_inbound_at ?? null}::timestamptz)`,
        ...(gone?.status === 'open' ? { status: 'open' as const } : {}),
        updated_at: now,
      }))
      .where('account_id', '=', accountId)
      .where('id', '=', into)
      .execute();
  }

  /** Replaces a merged contact's fields (its identities are moved separately). */
  async replaceFields(
    trx: Tx,
    accountId: string,
    id: string,
    fields: Pick<ContactRow, 'phone' | 'name' | 'email' | 'tags' | 'custom_fields' | 'updated_at'>,
  ): Promise<ContactRecord> {
    return trx
      .updateTable('contacts')
      .set({ ...fields, custom_fields: JSON.stringify(fields.custom_fields) })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning(CONTACT_COLUMNS)
      .returning(IDENTITIES)
      .executeTakeFirstOrThrow();
  }
}
