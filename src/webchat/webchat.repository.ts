import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { WebchatVisitorsTable } from '../db/schema.js';
import type { MessageRow } from '../messages/messages.repository.js';

export type StoredVisitor = Selectable<WebchatVisitorsTable>;
/**
 * A visitor with its contact: the one holding its webchat identity (see findVisitor); null
 * until it writes or is identified.
 */
export type VisitorRow = StoredVisitor & { contact_id: string | null };

/** The most messages one read returns: a widget shows the recent conversation. */
export const HISTORY_LIMIT = 200;

/**
 * A resumed session renews its visitor's `updated_at` (when the visitor was last seen, which
 * retention goes by) once it is this old, rather than write at every page load.
 */
export const VISITOR_SEEN_EVERY_MS = 86_400_000;

/** Webchat visitors, and the reads the widget makes of its visitor's conversation. */
export class WebchatRepository {
  constructor(private readonly db: Db) {}

  async insertVisitor(row: StoredVisitor): Promise<void> {
    await this.db.insertInto('webchat_visitors').values(row).execute();
  }

  /**
   * The visitor was seen at `now` (its session resumed): `updated_at` moves there, unless it
   * already moved within VISITOR_SEEN_EVERY_MS (another tab's page load just did it).
   */
  async markSeen(accountId: string, id: string, now: Date): Promise<void> {
    await this.db
      .updateTable('webchat_visitors')
      .set({ updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('updated_at', '<', new Date(now.getTime() - VISITOR_SEEN_EVERY_MS))
      .execute();
  }

  /**
   * The visitor, with `contact_id` the contact that now holds its webchat identity (the
   * verified identifier, else the visitor id): identities follow a merge and go with a deleted
   * contact, so a visitor whose contact was merged into another speaks as that one, and one
   * whose contact was deleted has none (its next message makes a new one).
   */
  async findVisitor(accountId: string, id: string): Promise<VisitorRow | undefined> {
    return this.db
      .selectFrom('webchat_visitors as v')
      .leftJoin('contact_identities as ci', (join) =>
        join
          .onRef('ci.account_id', '=', 'v.account_id')
          .on('ci.channel', '=', 'webchat')
          .on('ci.external_id', '=', sql<string>`coalesce(v.identifier, v.id)`),
      )
      .selectAll('v')
      .select('ci.contact_id')
      .where('v.account_id', '=', accountId)
      .where('v.id', '=', id)
      .executeTakeFirst();
  }

  /**
   * A verified visitor: from now on it is the contact that holds that identifier (see
   * findVisitor); only while the webchat connection still holds `sealedSecret`, the identity
   * secret the hash was checked with. The connection row is locked (shared) first: a rotation
   * under way is waited for and then seen, so that no identification made with the old secret
   * survives it (see ConnectionsService.connectWebchat, which locks in the same order).
   * Undefined when the secret changed meanwhile.
   */
  async setIdentity(
    accountId: string,
    id: string,
    identifier: string,
    now: Date,
    sealedSecret: Buffer,
  ): Promise<StoredVisitor | undefined> {
    const { rows } = await sql<StoredVisitor>`
      WITH vouching AS (
        SELECT 1 FROM channel_connections
        WHERE account_id = ${accountId} AND channel = 'webchat' AND secrets = ${sealedSecret}
        FOR SHARE
      )
      UPDATE webchat_visitors SET identifier = ${identifier}, updated_at = ${now}
      WHERE account_id = ${accountId} AND id = ${id} AND EXISTS (SELECT 1 FROM vouching)
      RETURNING *`.execute(this.db);
    return rows[0];
  }

  /**
   * Every visitor of the account identified so far is anonymous again, in the caller's
   * transaction (the identity secret that vouched for them was replaced): each must identify
   * again, with a hash made with the new secret, to be their contact once more.
   */
  async forgetIdentities(trx: Tx, accountId: string, now: Date): Promise<number> {
    const result = await trx
      .updateTable('webchat_visitors')
      .set({ identifier: null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('identifier', 'is not', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** The contact's webchat conversation, if it has one. */
  async conversationOf(accountId: string, contactId: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('conversations')
      .select('id')
      .where('account_id', '=', accountId)
      .where('contact_id', '=', contactId)
      .where('channel', '=', 'webchat')
      .executeTakeFirst();
    return row?.id;
  }

  /** The contact of a conversation (the one a message was just received in). */
  async contactOfConversation(
    accountId: string,
    conversationId: string,
  ): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('conversations')
      .select('contact_id')
      .where('account_id', '=', accountId)
      .where('id', '=', conversationId)
      .executeTakeFirst();
    return row?.contact_id;
  }

  /**
   * Messages of one conversation, oldest first: those created at or after `since`, or the last
   * HISTORY_LIMIT. Notes live in their own table and are never read here.
   */
  async messages(
    accountId: string,
    conversationId: string,
    since: Date | null,
  ): Promise<MessageRow[]> {
    let q = this.db
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId);
    if (since) {
      return q
        .where('created_at', '>=', since)
        .orderBy('created_at')
        .orderBy('id')
        .limit(HISTORY_LIMIT)
        .execute();
    }
    q = q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(HISTORY_LIMIT);
    return (await q.execute()).reverse();
  }

  /**
   * Up to `limit` messages of one conversation after `after` in (created_at, id) order, oldest
   * first: a page a stream reads, the next one starting after its last row.
   */
  async messagesAfter(
    accountId: string,
    conversationId: string,
    after: { at: Date; id: string },
    limit: number,
  ): Promise<MessageRow[]> {
    return (
      this.db
        .selectFrom('messages')
        .selectAll()
        .where('account_id', '=', accountId)
        .where('conversation_id', '=', conversationId)
        // (created_at, id) > (at, id), written as a range on created_at the index scans and a
        // filter on its first instant: the row comparison's generic plan cost the busy send path
        // (a stream reads at every reply) a p99 five times as long.
        .where('created_at', '>=', after.at)
        .where((eb) => eb.or([eb('created_at', '>', after.at), eb('id', '>', after.id)]))
        .orderBy('created_at')
        .orderBy('id')
        .limit(limit)
        .execute()
    );
  }

  /** Of these ids, the team's messages in this conversation (what a visitor may acknowledge). */
  async outboundIn(accountId: string, conversationId: string, ids: string[]): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('messages')
      .select('id')
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .where('direction', '=', 'outbound')
      .where('id', 'in', ids)
      .execute();
    return rows.map((r) => r.id);
  }
}
