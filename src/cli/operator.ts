import { AccountsRepository, type KeyOwner } from '../accounts/accounts.repository.js';
import {
  AccountsService,
  type Account,
  type ApiKey,
  type IssuedKey,
} from '../accounts/accounts.service.js';
import { systemClock } from '../clock.js';
import { loadConfig, type Config } from '../config.js';
import type { Db } from '../db/database.js';
import { ReadCache } from '../db/read-cache.js';
import type { Plan, UserRole } from '../db/schema.js';
import { Transactor } from '../db/transactor.js';
import type { PageResult } from '../http/pagination.js';
import { DeadJobs, type DeadJob } from '../jobs/dead-jobs.js';
import { openStore } from '../server.js';
import { InvitesRepository } from '../users/invites.repository.js';
import { SessionsRepository } from '../users/sessions.repository.js';
import { UsersRepository } from '../users/users.repository.js';
import { UsersService } from '../users/users.service.js';
import { AdminClient } from './admin-client.js';
import type { Remote } from './common.js';

export interface AccountPatch {
  name?: string;
  plan?: Plan;
  rate_limit_per_minute?: number | null;
}

export interface Invite {
  user_id: string;
  invite_url: string;
  expires_at: string;
}

export interface RetriedJob {
  id: string;
  kind: string;
  account_id: string;
}

/**
 * What the operator's commands do, the same whether on the store (StoreOperator) or through
 * a running service's admin API (AdminClient).
 */
export interface Operator {
  createAccount(input: {
    name: string;
    plan: Plan;
    rate_limit_per_minute: number | null;
  }): Promise<Account>;
  updateAccount(id: string, patch: AccountPatch): Promise<Account>;
  getAccount(id: string): Promise<Account>;
  listAccounts(page: { page: number; limit: number }): Promise<PageResult<Account>>;
  createApiKey(accountId: string, name: string | null): Promise<IssuedKey>;
  listApiKeys(accountId: string): Promise<ApiKey[]>;
  revokeApiKey(id: string): Promise<void>;
  invite(
    accountId: string,
    input: { email: string; role: UserRole; name?: string },
  ): Promise<Invite>;
  deadJobs(opts: { accountId?: string; limit: number }): Promise<DeadJob[]>;
  retryJob(id: string): Promise<RetriedJob>;
}

/** The operator's commands on the configured store (embedded under DATA_DIR, or DATABASE_URL). */
class StoreOperator implements Operator {
  private readonly accounts: AccountsService;
  private readonly users: UsersService;
  private readonly dead: DeadJobs;

  constructor(db: Db, config: Config) {
    // A one-off command caches nothing (the cache stays disabled); running services hear of its
    // changes through the change feed.
    const cache = new ReadCache<KeyOwner>({ maxEntries: 1, ttlMs: 0 });
    this.accounts = new AccountsService({
      db,
      accounts: new AccountsRepository(db),
      clock: systemClock,
      cache,
    });
    this.users = new UsersService({
      tx: new Transactor(db),
      users: new UsersRepository(db),
      invites: new InvitesRepository(),
      sessions: new SessionsRepository(db),
      assignees: {
        release: () => Promise.reject(new Error('the command line removes no one')),
      },
      clock: systemClock,
      publicUrl: config.publicUrl,
    });
    this.dead = new DeadJobs({ db, clock: systemClock });
  }

  createAccount(input: { name: string; plan: Plan; rate_limit_per_minute: number | null }) {
    return this.accounts.createAccount(input);
  }
  updateAccount(id: string, patch: AccountPatch) {
    return this.accounts.updateAccount(id, patch);
  }
  getAccount(id: string) {
    return this.accounts.getAccount(id);
  }
  listAccounts(page: { page: number; limit: number }) {
    return this.accounts.listAccounts(page);
  }
  createApiKey(accountId: string, name: string | null) {
    return this.accounts.createApiKey(accountId, name);
  }
  async listApiKeys(accountId: string) {
    return (await this.accounts.listApiKeysOf(accountId)).data;
  }
  revokeApiKey(id: string) {
    return this.accounts.revokeApiKey(id);
  }
  async invite(accountId: string, input: { email: string; role: UserRole; name?: string }) {
    await this.accounts.getAccount(accountId);
    return this.users.inviteByEmail(accountId, input);
  }
  deadJobs(opts: { accountId?: string; limit: number }) {
    return this.dead.list(opts);
  }
  retryJob(id: string) {
    return this.dead.retry(id);
  }
}

/**
 * Runs `work` through the service at `--url` when given, else on the store, which must exist:
 * only `serve`, `worker` and `migrate` create one.
 */
export async function withOperator<T>(
  opts: Remote,
  work: (operator: Operator) => Promise<T>,
): Promise<T> {
  if (opts.apiUrl !== undefined) return work(new AdminClient(opts.apiUrl, process.env.ADMIN_TOKEN));
  const config = loadConfig();
  const store = await openStore(config, undefined, { existing: true });
  try {
    return await work(new StoreOperator(store.db, config));
  } finally {
    await store.close();
  }
}
