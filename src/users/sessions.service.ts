import type { Clock } from '../clock.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import {
  AppError,
  Conflict,
  NotFound,
  RateLimited,
  Unauthorized,
  ValidationError,
} from '../errors.js';
import type { Principal } from '../http/auth.js';
import type { InvitesRepository } from './invites.repository.js';
import { hashPassword, verifyPassword } from './passwords.js';
import type { ActiveSession, SessionsRepository } from './sessions.repository.js';
import { newToken, tokenHash } from './tokens.js';
import type { SignInCandidate, UserRow, UsersRepository } from './users.repository.js';
import type { AcceptInviteBody, ChangePasswordBody, Session, SignInBody } from './users.schema.js';
import { newUserRow, toUser } from './users.service.js';

/** A session ends after this long without a request… */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** …and this long after sign-in, whatever happens. */
export const SESSION_MAX_MS = 30 * 24 * 60 * 60 * 1000;
/** Failed sign-ins count for this long: 10 for one email, or 50 from one address, lock it out. */
export const SIGN_IN_WINDOW_MS = 15 * 60 * 1000;
export const SIGN_IN_MAX_PER_EMAIL = 10;
export const SIGN_IN_MAX_PER_ADDRESS = 50;
// A session's last use is written at most this often, not on every request.
const TOUCH_EVERY_MS = 60 * 1000;

/** A new session: what the client is told, and the token its cookie carries. */
export interface SignedIn {
  session: Session;
  token: string;
}

/** Signing in and out, invites accepted, passwords changed, and sessions as credentials. */
export class SessionsService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      users: UsersRepository;
      sessions: SessionsRepository;
      invites: InvitesRepository;
      clock: Clock;
      /** Requests per minute of each signed-in user. */
      rateLimitPerMinute: number;
    },
  ) {}

  /**
   * Signs in by email and password. A wrong email and a wrong password fail alike; an email that
   * opens several accounts needs `account_id` (a 409 lists those its password opens).
   */
  async signIn(input: SignInBody, address: string): Promise<SignedIn> {
    const email = input.email.trim().toLowerCase();
    const now = this.deps.clock.now();
    const failures = await this.deps.sessions.failuresSince(
      email,
      address,
      new Date(now.getTime() - SIGN_IN_WINDOW_MS),
    );
    if (failures.email >= SIGN_IN_MAX_PER_EMAIL || failures.address >= SIGN_IN_MAX_PER_ADDRESS)
      // The window rolls: 15 minutes is the longest the wait can be.
      throw new RateLimited(
        'too many failed sign-ins; wait 15 minutes, or ask an admin for a new invite link',
        SIGN_IN_WINDOW_MS / 1000,
      );
    const candidates = (await this.deps.users.signInCandidates(email)).filter(
      (c) => input.account_id === undefined || c.account.id === input.account_id,
    );
    const opened: SignInCandidate[] = [];
    if (candidates.length === 0) await verifyPassword(input.password, null);
    for (const c of candidates)
      if (await verifyPassword(input.password, c.user.password_hash)) opened.push(c);
    if (opened.length === 0) {
      await this.deps.sessions.recordFailure(email, address, now);
      throw new Unauthorized('the email or the password is wrong');
    }
    if (opened.length > 1)
      throw new AppError(
        'conflict',
        'this email signs in to several accounts; say which with account_id',
        409,
        undefined,
        { accounts: opened.map((c) => ({ id: c.account.id, name: c.account.name })) },
      );
    await this.deps.sessions.clearFailures(email);
    const { user, account } = opened[0]!;
    return this.start(user, account);
  }

  /**
   * Spends an invite link: sets the user's password (and name, if given) and ends their other
   * sessions; the first admin's link creates its user. An unknown, spent or expired link is a 404.
   */
  async acceptInvite(input: AcceptInviteBody): Promise<SignedIn> {
    const passwordHash = await hashPassword(input.password);
    const now = this.deps.clock.now();
    const user = await this.deps.tx.db.transaction().execute(async (trx) => {
      const invite = await this.deps.invites.take(trx, tokenHash(input.token), now);
      if (!invite) throw new NotFound('invite (unknown, already used, or expired)');
      if (invite.user_id === null) {
        if (input.email === undefined)
          throw new ValidationError('email', 'is required to set up the first admin');
        if (input.name === undefined)
          throw new ValidationError('name', 'is required to set up the first admin');
        const row = newUserRow(
          invite.account_id,
          { name: input.name, email: input.email, role: 'admin', password_hash: passwordHash },
          now,
        );
        try {
          await this.deps.users.insertUser(trx, row);
        } catch (err) {
          if (isUniqueViolation(err, 'users_email'))
            throw new Conflict(
              `a user with email ${input.email} already exists; ask them for an invite`,
            );
          throw err;
        }
        return row;
      }
      const found = await this.deps.users.findUser(invite.account_id, invite.user_id, trx);
      if (!found) throw new NotFound('invite (its user was removed)');
      if (found.name === '' && input.name === undefined)
        throw new ValidationError('name', 'is required: the invite has no name for you yet');
      const row = await this.deps.users.updateUser(trx, invite.account_id, found.id, {
        password_hash: passwordHash,
        ...(input.name !== undefined && { name: input.name }),
      });
      await this.deps.sessions.deleteForUser(trx, invite.account_id, found.id);
      return row!;
    });
    const account = await this.deps.users.accountOf(user.account_id);
    return this.start(user, account);
  }

  /** The principal of a live session (its last use noted), or undefined when it has ended. */
  async principal(token: string): Promise<Principal | undefined> {
    const active = await this.find(tokenHash(token));
    if (!active) return undefined;
    const { session, user } = active;
    return {
      accountId: user.account_id,
      role: user.role,
      actor: { type: 'user', id: user.id, name: user.name },
      session: { tokenHash: session.token_hash, csrfToken: session.csrf_token, userId: user.id },
      rate: { key: `user:${user.account_id}:${user.id}`, limit: this.deps.rateLimitPerMinute },
    };
  }

  /** Which of these sessions (by token hash) have ended: signed out, expired, or their user gone. */
  async endedSessions(tokenHashes: string[]): Promise<Map<string, string>> {
    const now = this.deps.clock.now();
    const live = await this.deps.sessions.liveAmong(
      tokenHashes,
      now,
      new Date(now.getTime() - SESSION_IDLE_MS),
    );
    return new Map(tokenHashes.filter((h) => !live.has(h)).map((h) => [h, 'session_ended']));
  }

  /** The session as `GET /v1/session` shows it. */
  async describe(principal: Principal): Promise<Session> {
    const active = await this.find(principal.session!.tokenHash);
    if (!active) throw new Unauthorized('the session has ended; sign in again');
    return present(active);
  }

  async signOut(principal: Principal): Promise<void> {
    await this.deps.sessions.delete(principal.session!.tokenHash);
  }

  /** Changes the signed-in user's password; their other sessions end. */
  async changePassword(
    scope: Scope,
    principal: Principal,
    input: ChangePasswordBody,
  ): Promise<{ success: true }> {
    const { accountId, session } = principal;
    const user = await this.deps.users.findUser(accountId, session!.userId);
    if (!user || !(await verifyPassword(input.current_password, user.password_hash)))
      throw new AppError('validation_error', 'current_password: is wrong', 422, [
        { field: 'current_password', issue: 'is wrong' },
      ]);
    const passwordHash = await hashPassword(input.new_password);
    return this.deps.tx.run(scope, async (trx) => {
      await this.deps.users.updateUser(trx, accountId, user.id, { password_hash: passwordHash });
      await this.deps.sessions.deleteForUser(trx, accountId, user.id, session!.tokenHash);
      return { success: true as const };
    });
  }

  private async find(hash: string): Promise<ActiveSession | undefined> {
    const now = this.deps.clock.now();
    const active = await this.deps.sessions.findActive(
      hash,
      now,
      new Date(now.getTime() - SESSION_IDLE_MS),
    );
    if (active && now.getTime() - active.session.last_seen_at.getTime() > TOUCH_EVERY_MS)
      await this.deps.sessions.touch(hash, now);
    return active;
  }

  private async start(user: UserRow, account: ActiveSession['account']): Promise<SignedIn> {
    const token = newToken();
    const now = this.deps.clock.now();
    const session = {
      token_hash: tokenHash(token),
      account_id: user.account_id,
      user_id: user.id,
      csrf_token: newToken(),
      created_at: now,
      last_seen_at: now,
      expires_at: new Date(now.getTime() + SESSION_MAX_MS),
    };
    await this.deps.sessions.insert(this.deps.tx.db, session);
    return { session: present({ session, user, account }), token };
  }
}

function present({ session, user, account }: ActiveSession): Session {
  return { user: toUser(user), account, csrf_token: session.csrf_token };
}
