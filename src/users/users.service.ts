import type { Clock } from '../clock.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Conflict, NotFound } from '../errors.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { TeamRow, UserRow, UsersRepository } from './users.repository.js';
import type { CreateTeamBody, CreateUserBody, Team, User } from './users.schema.js';

const toUser = (r: UserRow): User => ({
  id: r.id,
  name: r.name,
  email: r.email,
  created_at: r.created_at.toISOString(),
});
const toTeam = (r: TeamRow): Team => ({
  id: r.id,
  name: r.name,
  user_ids: r.user_ids,
  created_at: r.created_at.toISOString(),
});

/** Team members and teams: the assignees of conversations. */
export class UsersService {
  constructor(private readonly deps: { tx: Transactor; users: UsersRepository; clock: Clock }) {}

  async createUser(scope: Scope, input: CreateUserBody): Promise<User> {
    const row: UserRow = {
      account_id: scope.accountId,
      id: newId('usr'),
      name: input.name,
      email: input.email,
      created_at: this.deps.clock.now(),
    };
    // In a transaction, like every write, so that an idempotent request's record commits with it.
    return this.deps.tx.run(scope, async (trx) => {
      try {
        await this.deps.users.insertUser(trx, row);
      } catch (err) {
        if (isUniqueViolation(err, 'users_email'))
          throw new Conflict(`a user with email ${input.email} already exists`);
        throw err;
      }
      return toUser(row);
    });
  }

  async getUser(scope: Scope, id: string): Promise<User> {
    const row = await this.deps.users.findUser(scope.accountId, id);
    if (!row) throw new NotFound('user', id);
    return toUser(row);
  }

  async listUsers(scope: Scope, page: PageRequest): Promise<PageResult<User>> {
    const { rows, total } = await this.deps.users.listUsers(scope.accountId, page);
    return { data: rows.map(toUser), total, page: page.page };
  }

  async createTeam(scope: Scope, input: CreateTeamBody): Promise<Team> {
    const userIds = [...new Set(input.user_ids ?? [])];
    return this.deps.tx.run(scope, async (trx) => {
      const existing = await this.deps.users.existingUserIds(scope.accountId, userIds, trx);
      const missing = userIds.find((id) => !existing.has(id));
      if (missing !== undefined) throw new NotFound('user', missing);
      const row: TeamRow = {
        account_id: scope.accountId,
        id: newId('team'),
        name: input.name,
        user_ids: userIds,
        created_at: this.deps.clock.now(),
      };
      await this.deps.users.insertTeam(trx, row);
      return toTeam(row);
    });
  }

  async getTeam(scope: Scope, id: string): Promise<Team> {
    const row = await this.deps.users.findTeam(scope.accountId, id);
    if (!row) throw new NotFound('team', id);
    return toTeam(row);
  }

  async listTeams(scope: Scope, page: PageRequest): Promise<PageResult<Team>> {
    const { rows, total } = await this.deps.users.listTeams(scope.accountId, page);
    return { data: rows.map(toTeam), total, page: page.page };
  }
}
