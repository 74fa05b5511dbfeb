import type { Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { TeamsTable, UsersTable } from '../db/schema.js';
import { paged } from '../db/paged.js';
import type { PageRequest } from '../http/pagination.js';

export type UserRow = Selectable<UsersTable>;
export type TeamRow = Selectable<TeamsTable>;

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
