import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { Channel, ChannelConnectionsTable } from '../db/schema.js';

export type ConnectionRow = Selectable<ChannelConnectionsTable>;

/** Channel connections: at most one per account and channel. */
export class ConnectionsRepository {
  constructor(private readonly db: Db) {}

  async listForAccount(accountId: string): Promise<ConnectionRow[]> {
    return this.db
      .selectFrom('channel_connections')
      .selectAll()
      .where('account_id', '=', accountId)
      .execute();
  }

  async findByChannel(
    accountId: string,
    channel: Channel,
    trx: Tx | Db = this.db,
  ): Promise<ConnectionRow | undefined> {
    return trx
      .selectFrom('channel_connections')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .executeTakeFirst();
  }

  /** By id alone: the provider webhook route knows the connection, not the account. */
  async findById(id: string): Promise<ConnectionRow | undefined> {
    return this.db
      .selectFrom('channel_connections')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** By ids alone (several webhooks' connections in one round trip). */
  async findManyById(ids: string[]): Promise<ConnectionRow[]> {
    if (ids.length === 0) return [];
    return this.db.selectFrom('channel_connections').selectAll().where('id', 'in', ids).execute();
  }

  /**
   * Connects the channel, or replaces its connection's settings, keeping its id and its verify
   * token (Meta's dashboard holds a copy of the token; two racing first connections keep one).
   */
  async upsert(trx: Tx, row: ConnectionRow): Promise<ConnectionRow> {
    return trx
      .insertInto('channel_connections')
      .values({ ...row, settings: JSON.stringify(row.settings) })
      .onConflict((oc) =>
        oc.columns(['account_id', 'channel']).doUpdateSet({
          provider: row.provider,
          status: row.status,
          error: row.error,
          settings: JSON.stringify(row.settings),
          secrets: row.secrets,
          verify_token: sql<
            string | null
          >`coalesce(channel_connections.verify_token, excluded.verify_token)`,
          updated_at: row.updated_at,
        }),
      )
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /**
   * The provider refused the credentials a call was made with (an expired token): shown until
   * reconnected. Only while the connection still holds those credentials: a refusal of the old
   * token that arrives after they were replaced (or the channel connected anew) marks nothing.
   */
  async markRefused(
    accountId: string,
    refused: { id: string; secrets: Buffer | null },
    error: string,
    now: Date,
  ): Promise<boolean> {
    let q = this.db
      .updateTable('channel_connections')
      .set({ status: 'error', error, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', refused.id);
    // Sealed with a fresh nonce each time: equal bytes are the very credentials refused.
    q =
      refused.secrets === null
        ? q.where('secrets', 'is', null)
        : q.where('secrets', '=', refused.secrets);
    const r = await q.executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * The channel of one of the account's messages (its conversation's) and that channel's
   * connection, if any; undefined when there is no such message.
   */
  async findForMessage(
    accountId: string,
    messageId: string,
  ): Promise<{ channel: Channel; connection: ConnectionRow | null } | undefined> {
    const found = await this.db
      .selectFrom('messages as m')
      .innerJoin('conversations as c', (j) =>
        j.onRef('c.account_id', '=', 'm.account_id').onRef('c.id', '=', 'm.conversation_id'),
      )
      .select('c.channel')
      .where('m.account_id', '=', accountId)
      .where('m.id', '=', messageId)
      .executeTakeFirst();
    if (!found) return undefined;
    const connection = await this.findByChannel(accountId, found.channel);
    return { channel: found.channel, connection: connection ?? null };
  }

  async remove(trx: Tx, accountId: string, channel: Channel): Promise<boolean> {
    const r = await trx
      .deleteFrom('channel_connections')
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }
}
