import { sql, type Selectable, type Updateable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { Plan, TeamsTable, UserRole, UsersTable } from '../db/schema.js';
import { paged } from '../db/paged.js';
import type { PageRequest } from '../http/pagination.js';

export type UserRow = Selectable<UsersTable>;
export type TeamRow = Selectable<TeamsTable>;

/** A user who may sign in with a password, with their account. */
export interface SignInCandidate {
  user: UserRow;
  account: { id: string; name: string; plan: Plan };
}

export class UsersRepository {
  constructor(private readonly db: Db) {}

  async insertUser(trx: Tx | Db, row: UserRow): Promise<void> {
    await trx.insertInto('users').values(row).execute();
  }

  async findUser(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<UserRow | undefined> {
    return trx
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async findUserByEmail(
    trx: Tx | Db,
    accountId: string,
    email: string,
  ): Promise<UserRow | undefined> {
    return trx
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where(sql<string>`lower(email)`, '=', email.toLowerCase())
      .executeTakeFirst();
  }

  /** Every user with this email and a password, in any account (sign-in), oldest first. */
  async signInCandidates(email: string): Promise<SignInCandidate[]> {
    const rows = await this.db
      .selectFrom('users as u')
      .innerJoin('accounts as a', 'a.id', 'u.account_id')
      .selectAll('u')
      .select(['a.name as account_name', 'a.plan as account_plan'])
      .where(sql<string>`lower(u.email)`, '=', email.toLowerCase())
      .where('u.password_hash', 'is not', null)
      .orderBy('u.created_at')
      .limit(50)
      .execute();
    return rows.map(({ account_name, account_plan, ...user }) => ({
      user,
      account: { id: user.account_id, name: account_name, plan: account_plan },
    }));
  }

  async accountOf(accountId: string): Promise<SignInCandidate['account']> {
    return this.db
      .selectFrom('accounts')
      .select(['id', 'name', 'plan'])
      .where('id', '=', accountId)
      .executeTakeFirstOrThrow();
  }

  async updateUser(
    trx: Tx,
    accountId: string,
    id: string,
    patch: Updateable<UsersTable>,
  ): Promise<UserRow | undefined> {
    return trx
      .updateTable('users')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async deleteUser(trx: Tx, accountId: string, id: string): Promise<boolean> {
    const r = await trx
      .deleteFrom('users')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /**
   * The account's admins, locked: a demotion or removal checks that another remains, and two
   * such changes at once take their turns.
   */
  async lockAdmins(trx: Tx, accountId: string): Promise<string[]> {
    const role: UserRole = 'admin';
    const rows = await trx
      .selectFrom('users')
      .select('id')
      .where('account_id', '=', accountId)
      .where('role', '=', role)
      .orderBy('id')
      .forUpdate()
      .execute();
    return rows.map((r) => r.id);
  }

  /** Takes the user out of every team of the account. */
  async removeFromTeams(trx: Tx, accountId: string, userId: string): Promise<void> {
    await trx
      .updateTable('teams')
      .set({ user_ids: sql`array_remove(user_ids, ${userId})` })
      .where('account_id', '=', accountId)
      .where(sql<boolean>`${userId} = ANY(user_ids)`)
      .execute();
  }

  async updateTeam(
    trx: Tx,
    accountId: string,
    id: string,
    patch: Updateable<TeamsTable>,
  ): Promise<TeamRow | undefined> {
    return trx
      .updateTable('teams')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  async deleteTeam(trx: Tx, accountId: string, id: string): Promise<boolean> {
    const r = await trx
      .deleteFrom('teams')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numDeletedRows > 0n;
  }

  /** The ids among `ids` that are users of the account. */
  async existingUserIds(
    accountId: string,
    ids: string[],
    trx: Tx | Db = this.db,
  ): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await trx
      .selectFrom('users')
      .select('id')
      .where('account_id', '=', accountId)
      .where('id', 'in', ids)
      .execute();
    return new Set(rows.map((r) => r.id));
  }

  async listUsers(
    accountId: string,
    page: PageRequest,
  ): Promise<{ rows: UserRow[]; total: number }> {
    return paged(this.db.selectFrom('users').where('account_id', '=', accountId), page, (q) =>
      q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc'),
    );
  }

  async insertTeam(trx: Tx | Db, row: TeamRow): Promise<void> {
    await trx.insertInto('teams').values(row).execute();
  }

  async findTeam(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<TeamRow | undefined> {
    return trx
      .selectFrom('teams')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async listTeams(
    accountId: string,
    page: PageRequest,
  ): Promise<{ rows: TeamRow[]; total: number }> {
    return paged(this.db.selectFrom('teams').where('account_id', '=', accountId), page, (q) =>
      q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc'),
    );
  }

  /** Display names for assignees, by id, in one query per kind. */
  async namesOf(
    accountId: string,
    userIds: string[],
    teamIds: string[],
  ): Promise<Map<string, string>> {
    const names = new Map<string, string>();
    const [users, teams] = await Promise.all([
      userIds.length
        ? this.db
            .selectFrom('users')
            .select(['id', 'name'])
            .where('account_id', '=', accountId)
            .where('id', 'in', userIds)
            .execute()
        : [],
      teamIds.length
        ? this.db
            .selectFrom('teams')
            .select(['id', 'name'])
            .where('account_id', '=', accountId)
            .where('id', 'in', teamIds)
            .execute()
        : [],
    ]);
    for (const r of [...users, ...teams]) names.set(r.id, r.name);
    return names;
  }
}
