import { AccountsRepository, type KeyOwner } from '../accounts/accounts.repository.js';
import { AccountsService } from '../accounts/accounts.service.js';
import { systemClock } from '../clock.js';
import { loadConfig, type Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Plan, UserRole } from '../db/schema.js';
import { ReadCache } from '../db/read-cache.js';
import { Transactor } from '../db/transactor.js';
import { DeadJobs } from '../jobs/dead-jobs.js';
import { openStore } from '../server.js';
import { InvitesRepository } from '../users/invites.repository.js';
import { SessionsRepository } from '../users/sessions.repository.js';
import { UsersRepository } from '../users/users.repository.js';
import { UsersService } from '../users/users.service.js';
import type { AccountPatch, Operator } from './operator.js';

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

/** Runs `work` with the operator of the configured store, opened for it and closed after. */
export async function withStoreOperator<T>(work: (operator: Operator) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const store = await openStore(config, undefined, { existing: true });
  try {
    return await work(new StoreOperator(store.db, config));
  } finally {
    await store.close();
  }
}
