import { sql, type Selectable } from 'kysely';
import type { Db } from '../db/database.js';
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

/** Visitors whose outdated identification one statement clears (see forgetIdentities). */
export const FORGET_BATCH = 5_000;

/** The visitor's identifier while the secret that vouched for it is the connection's (`c`). */
const VOUCHED_IDENTIFIER = sql<
  string | null
>`CASE WHEN v.vouched_by = sha256(c.secrets) THEN v.identifier END`;

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
   * The visitor, with its identifier only while the identity secret that vouched for it is still
   * the connection's (a rotation or a new connection ends every identification at once), and
   * `contact_id` the contact that now holds its webchat identity (the
   * verified identifier, else the visitor id): identities follow a merge and go with a deleted
   * contact, so a visitor whose contact was merged into another speaks as that one, and one
   * whose contact was deleted has none (its next message makes a new one).
   */
  async findVisitor(accountId: string, id: string): Promise<VisitorRow | undefined> {
    return this.db
      .selectFrom('webchat_visitors as v')
      .leftJoin('channel_connections as c', (join) =>
        join.onRef('c.account_id', '=', 'v.account_id').on('c.channel', '=', 'webchat'),
      )
      .leftJoin('contact_identities as ci', (join) =>
        join
          .onRef('ci.account_id', '=', 'v.account_id')
          .on('ci.channel', '=', 'webchat')
          .on('ci.external_id', '=', sql<string>`coalesce(${VOUCHED_IDENTIFIER}, v.id)`),
      )
      .select(['v.account_id', 'v.id', 'v.created_at', 'v.updated_at', 'v.vouched_by'])
      .select(VOUCHED_IDENTIFIER.as('identifier'))
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
      UPDATE webchat_visitors
      SET identifier = ${identifier}, vouched_by = sha256(${sealedSecret}), updated_at = ${now}
      WHERE account_id = ${accountId} AND id = ${id} AND EXISTS (SELECT 1 FROM vouching)
      RETURNING *`.execute(this.db);
    return rows[0];
  }

  /**
   * Clears the identifiers that no longer count (see findVisitor: vouched for by an identity
   * secret the connection no longer holds), `batchSize` visitors per statement, each its own
   * short transaction; those visitors are anonymous already, so nothing waits for this. A
   * visitor identified again meanwhile, with the new secret, is left as it is.
   */
  async forgetIdentities(accountId: string, now: Date, batchSize = FORGET_BATCH): Promise<number> {
    let forgotten = 0;
    for (;;) {
      const result = await sql`
        WITH current AS (
          SELECT sha256(secrets) AS vouched_by FROM channel_connections
          WHERE account_id = ${accountId} AND channel = 'webchat'
        )
        UPDATE webchat_visitors SET identifier = NULL, vouched_by = NULL, updated_at = ${now}
        WHERE ctid IN (
          SELECT ctid FROM webchat_visitors
          WHERE account_id = ${accountId} AND identifier IS NOT NULL
            AND vouched_by IS DISTINCT FROM (SELECT vouched_by FROM current)
          LIMIT ${batchSize})
          AND vouched_by IS DISTINCT FROM (SELECT vouched_by FROM current)`.execute(this.db);
      const n = Number(result.numAffectedRows ?? 0n);
      forgotten += n;
      if (n < batchSize) return forgotten;
    }
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
