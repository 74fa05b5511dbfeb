import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { Plan, SessionsTable } from '../db/schema.js';
import type { UserRow } from './users.repository.js';

export type SessionRow = Selectable<SessionsTable>;

/** A live session with its user and account, as a request is authenticated by it. */
export interface ActiveSession {
  session: SessionRow;
  user: UserRow;
  account: { id: string; name: string; plan: Plan };
}

/** Sessions by the hash of their token, and the failed sign-ins the brute-force limits count. */
export class SessionsRepository {
  constructor(private readonly db: Db) {}

  async insert(trx: Tx | Db, row: SessionRow): Promise<void> {
    await trx.insertInto('sessions').values(row).execute();
  }

  /** The session if it is live at `now`: neither idle since `idleSince` nor past its end. */
  async findActive(
    tokenHash: string,
    now: Date,
    idleSince: Date,
  ): Promise<ActiveSession | undefined> {
    const row = await this.db
      .selectFrom('sessions as s')
      .innerJoin('users as u', (j) =>
        j.onRef('u.account_id', '=', 's.account_id').onRef('u.id', '=', 's.user_id'),
      )
      .innerJoin('accounts as a', 'a.id', 's.account_id')
      .select([
        's.token_hash',
        's.account_id',
        's.user_id',
        's.csrf_token',
        's.created_at as session_created_at',
        's.last_seen_at',
        's.expires_at',
        'u.name',
        'u.email',
        'u.role',
        'u.password_hash',
        'u.created_at as user_created_at',
        'a.name as account_name',
        'a.plan',
      ])
      .where('s.token_hash', '=', tokenHash)
      .where('s.expires_at', '>', now)
      .where('s.last_seen_at', '>', idleSince)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      session: {
        token_hash: row.token_hash,
        account_id: row.account_id,
        user_id: row.user_id,
        csrf_token: row.csrf_token,
        created_at: row.session_created_at,
        last_seen_at: row.last_seen_at,
        expires_at: row.expires_at,
      },
      user: {
        account_id: row.account_id,
        id: row.user_id,
        name: row.name,
        email: row.email,
        role: row.role,
        password_hash: row.password_hash,
        created_at: row.user_created_at,
      },
      account: { id: row.account_id, name: row.account_name, plan: row.plan },
    };
  }

  /** Those of these sessions that are live at `now`. */
  async liveAmong(tokenHashes: string[], now: Date, idleSince: Date): Promise<Set<string>> {
    if (tokenHashes.length === 0) return new Set();
    const rows = await this.db
      .selectFrom('sessions')
      .select('token_hash')
      .where('token_hash', '=', sql<string>`ANY(${tokenHashes}::text[])`)
      .where('expires_at', '>', now)
      .where('last_seen_at', '>', idleSince)
      .execute();
    return new Set(rows.map((r) => r.token_hash));
  }

  async touch(tokenHash: string, now: Date): Promise<void> {
    await this.db
      .updateTable('sessions')
      .set({ last_seen_at: now })
      .where('token_hash', '=', tokenHash)
      .execute();
  }

  async delete(tokenHash: string): Promise<void> {
    await this.db.deleteFrom('sessions').where('token_hash', '=', tokenHash).execute();
  }

  /** Ends the user's sessions, but for `keep` (the one that asked) when given. */
  async deleteForUser(
    trx: Tx | Db,
    accountId: string,
    userId: string,
    keep?: string,
  ): Promise<void> {
    let q = trx
      .deleteFrom('sessions')
      .where('account_id', '=', accountId)
      .where('user_id', '=', userId);
    if (keep !== undefined) q = q.where('token_hash', '!=', keep);
    await q.execute();
  }

  async pruneExpired(now: Date, idleSince: Date): Promise<number> {
    const r = await this.db
      .deleteFrom('sessions')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', idleSince)]))
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Failed sign-ins since `since`, for this email (lower-cased) and from this address. */
  async failuresSince(
    email: string,
    address: string,
    since: Date,
  ): Promise<{ email: number; address: number }> {
    const row = await sql<{ email: string; address: string }>`
      SELECT (SELECT count(*) FROM sign_in_failures WHERE email = ${email} AND at > ${since}) AS email,
             (SELECT count(*) FROM sign_in_failures WHERE address = ${address} AND at > ${since}) AS address`.execute(
      this.db,
    );
    const r = row.rows[0]!;
    return { email: Number(r.email), address: Number(r.address) };
  }

  async recordFailure(email: string, address: string, at: Date): Promise<void> {
    await this.db.insertInto('sign_in_failures').values({ email, address, at }).execute();
  }

  /** A successful sign-in forgets the email's failures. */
  async clearFailures(email: string): Promise<void> {
    await this.db.deleteFrom('sign_in_failures').where('email', '=', email).execute();
  }

  async pruneFailures(before: Date): Promise<number> {
    const r = await this.db
      .deleteFrom('sign_in_failures')
      .where('at', '<=', before)
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
