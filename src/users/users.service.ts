import type { Clock } from '../clock.js';
import type { Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/errors.js';
import type { UserRole } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Conflict, NotFound } from '../errors.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { InvitesRepository } from './invites.repository.js';
import type { SessionsRepository } from './sessions.repository.js';
import { newToken, tokenHash } from './tokens.js';
import type { TeamRow, UserRow, UsersRepository } from './users.repository.js';
import type {
  CreateTeamBody,
  CreatedUser,
  CreateUserBody,
  Invite,
  Team,
  UpdateTeamBody,
  UpdateUserBody,
  User,
} from './users.schema.js';

/** How long an invite link (or a first admin's setup link) works. */
export const INVITE_TTL_MS = 7 * 24 * 60 * 60 * 1000;

export const toUser = (r: UserRow): User => ({
  id: r.id,
  name: r.name,
  email: r.email,
  role: r.role,
  status: r.password_hash === null ? 'invited' : 'active',
  created_at: r.created_at.toISOString(),
});
/** A new user of the account, as stored (no password until they accept an invite). */
export function newUserRow(
  accountId: string,
  fields: { name: string; email: string; role: UserRole; password_hash?: string },
  now: Date,
): UserRow {
  return {
    account_id: accountId,
    id: newId('usr'),
    password_hash: null,
    ...fields,
    created_at: now,
  };
}

const toTeam = (r: TeamRow): Team => ({
  id: r.id,
  name: r.name,
  user_ids: r.user_ids,
  created_at: r.created_at.toISOString(),
});

/**
 * What the conversations feature does when an assignee goes: unassigns its conversations, each
 * with its event, in the caller's transaction.
 */
export interface AssigneeRelease {
  release(trx: Tx, scope: Scope, assignee: { type: 'user' | 'team'; id: string }): Promise<void>;
}

/** Team members and teams: the assignees of conversations, and the people who sign in. */
export class UsersService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      users: UsersRepository;
      invites: InvitesRepository;
      sessions: SessionsRepository;
      assignees: AssigneeRelease;
      clock: Clock;
      /** The service's public base URL, which invite links start with. */
      publicUrl: string;
    },
  ) {}

  /** Adds a user (an agent unless `role` says otherwise) with the invite that sets a password. */
  async createUser(scope: Scope, input: CreateUserBody): Promise<CreatedUser> {
    const row = newUserRow(
      scope.accountId,
      { name: input.name, email: input.email, role: input.role ?? 'agent' },
      this.deps.clock.now(),
    );
    // In a transaction, like every write, so that an idempotent request's record commits with it.
    return this.deps.tx.run(scope, async (trx) => {
      try {
        await this.deps.users.insertUser(trx, row);
      } catch (err) {
        if (isUniqueViolation(err, 'users_email'))
          throw new Conflict(`a user with email ${input.email} already exists`);
        throw err;
      }
      return { ...toUser(row), ...(await this.invite(trx, row.account_id, row.id, row.role)) };
    });
  }

  /**
   * An invite for `email` in the account (the admin API and `switchboard users invite`): a new
   * user, or a new link for the user who has that email already.
   */
  async inviteByEmail(
    accountId: string,
    input: { email: string; role: UserRole; name?: string },
  ): Promise<Invite & { user_id: string }> {
    return this.deps.tx.run({ accountId }, async (trx) => {
      const found = await this.deps.users.findUserByEmail(trx, accountId, input.email);
      if (found)
        return { user_id: found.id, ...(await this.invite(trx, accountId, found.id, found.role)) };
      // Without a name now, the user gives one when accepting.
      const row = newUserRow(
        accountId,
        { name: input.name ?? '', email: input.email, role: input.role },
        this.deps.clock.now(),
      );
      await this.deps.users.insertUser(trx, row);
      return { user_id: row.id, ...(await this.invite(trx, accountId, row.id, row.role)) };
    });
  }

  /** A new invite link for the user; their earlier one stops working. */
  async reinvite(scope: Scope, id: string): Promise<Invite> {
    return this.deps.tx.run(scope, async (trx) => {
      const row = await this.deps.users.findUser(scope.accountId, id, trx);
      if (!row) throw new NotFound('user', id);
      return this.invite(trx, scope.accountId, id, row.role);
    });
  }

  /** The one-time link that creates an account's first admin (printed at a store's first start). */
  async setupLink(accountId: string): Promise<Invite> {
    return this.deps.tx.run({ accountId }, (trx) => this.invite(trx, accountId, null, 'admin'));
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

  /** Renames the user or changes their role; the account keeps at least one admin. */
  async updateUser(scope: Scope, id: string, input: UpdateUserBody): Promise<User> {
    return this.deps.tx.run(scope, async (trx) => {
      if (input.role === 'agent') await this.keepAnAdmin(trx, scope.accountId, id, 'demote');
      const row = await this.deps.users.updateUser(trx, scope.accountId, id, input);
      if (!row) throw new NotFound('user', id);
      return toUser(row);
    });
  }

  /**
   * Removes the user: their sessions end at once, their conversations are unassigned (with
   * events) and they leave their teams; what they wrote keeps their name. The account keeps at
   * least one admin.
   */
  async deleteUser(scope: Scope, id: string): Promise<{ success: true }> {
    return this.deps.tx.run(scope, async (trx) => {
      await this.keepAnAdmin(trx, scope.accountId, id, 'remove');
      if (!(await this.deps.users.findUser(scope.accountId, id, trx)))
        throw new NotFound('user', id);
      await this.deps.assignees.release(trx, scope, { type: 'user', id });
      await this.deps.users.removeFromTeams(trx, scope.accountId, id);
      await this.deps.sessions.deleteForUser(trx, scope.accountId, id);
      await this.deps.invites.deleteForUser(trx, scope.accountId, id);
      await this.deps.users.deleteUser(trx, scope.accountId, id);
      return { success: true as const };
    });
  }

  async createTeam(scope: Scope, input: CreateTeamBody): Promise<Team> {
    const userIds = [...new Set(input.user_ids ?? [])];
    return this.deps.tx.run(scope, async (trx) => {
      await this.checkMembers(trx, scope.accountId, userIds);
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

  /** Renames a team or sets its members (each must exist). */
  async updateTeam(scope: Scope, id: string, input: UpdateTeamBody): Promise<Team> {
    const userIds = input.user_ids && [...new Set(input.user_ids)];
    return this.deps.tx.run(scope, async (trx) => {
      if (userIds) await this.checkMembers(trx, scope.accountId, userIds);
      const row = await this.deps.users.updateTeam(trx, scope.accountId, id, {
        ...(input.name !== undefined && { name: input.name }),
        ...(userIds && { user_ids: userIds }),
      });
      if (!row) throw new NotFound('team', id);
      return toTeam(row);
    });
  }

  /** Deletes a team; its conversations are unassigned, each with its event. */
  async deleteTeam(scope: Scope, id: string): Promise<{ success: true }> {
    return this.deps.tx.run(scope, async (trx) => {
      if (!(await this.deps.users.findTeam(scope.accountId, id, trx)))
        throw new NotFound('team', id);
      await this.deps.assignees.release(trx, scope, { type: 'team', id });
      await this.deps.users.deleteTeam(trx, scope.accountId, id);
      return { success: true as const };
    });
  }

  private async checkMembers(trx: Tx, accountId: string, userIds: string[]): Promise<void> {
    const existing = await this.deps.users.existingUserIds(accountId, userIds, trx);
    const missing = userIds.find((id) => !existing.has(id));
    if (missing !== undefined) throw new NotFound('user', missing);
  }

  /** Refuses to demote or remove the account's last admin. */
  private async keepAnAdmin(
    trx: Tx,
    accountId: string,
    userId: string,
    what: 'demote' | 'remove',
  ): Promise<void> {
    const admins = await this.deps.users.lockAdmins(trx, accountId);
    if (admins.length === 1 && admins[0] === userId)
      throw new Conflict(
        `cannot ${what} the account's last admin; make another user an admin first`,
      );
  }

  private async invite(
    trx: Tx,
    accountId: string,
    userId: string | null,
    role: UserRole,
  ): Promise<Invite> {
    const token = newToken();
    const now = this.deps.clock.now();
    const expiresAt = new Date(now.getTime() + INVITE_TTL_MS);
    await this.deps.invites.issue(trx, {
      token_hash: tokenHash(token),
      account_id: accountId,
      user_id: userId,
      role,
      expires_at: expiresAt,
      created_at: now,
    });
    const page = userId === null ? 'setup' : 'invite';
    return {
      invite_url: `${this.deps.publicUrl}/app/${page}#token=${token}`,
      expires_at: expiresAt.toISOString(),
    };
  }
}
