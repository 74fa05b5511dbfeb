import type { Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { InvitesTable } from '../db/schema.js';

export type InviteRow = Selectable<InvitesTable>;

/** Invite links by the hash of their token; the token itself is never stored. */
export class InvitesRepository {
  /** Stores a link; a user's earlier links stop working. */
  async issue(trx: Tx, row: InviteRow): Promise<void> {
    if (row.user_id !== null) await this.deleteForUser(trx, row.account_id, row.user_id);
    await trx.insertInto('invites').values(row).execute();
  }

  /** Spends a link: gone once taken, and undefined when unknown, spent or expired. */
  async take(trx: Tx, tokenHash: string, now: Date): Promise<InviteRow | undefined> {
    const row = await trx
      .deleteFrom('invites')
      .where('token_hash', '=', tokenHash)
      .returningAll()
      .executeTakeFirst();
    return row && row.expires_at > now ? row : undefined;
  }

  async deleteForUser(trx: Tx | Db, accountId: string, userId: string): Promise<void> {
    await trx
      .deleteFrom('invites')
      .where('account_id', '=', accountId)
      .where('user_id', '=', userId)
      .execute();
  }

  async pruneExpired(db: Db, now: Date): Promise<number> {
    const r = await db.deleteFrom('invites').where('expires_at', '<=', now).executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
