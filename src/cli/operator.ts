import type { Account, ApiKey, IssuedKey } from '../accounts/accounts.service.js';
import type { Plan, UserRole } from '../db/schema.js';
import type { PageResult } from '../http/pagination.js';
import type { DeadJob } from '../jobs/dead-jobs.js';
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

/**
 * Runs `work` through the service at `--url` when given, else on the store, which must exist:
 * only `serve`, `worker` and `migrate` create one.
 */
export async function withOperator<T>(
  opts: Remote,
  work: (operator: Operator) => Promise<T>,
): Promise<T> {
  if (opts.apiUrl !== undefined) return work(new AdminClient(opts.apiUrl, process.env.ADMIN_TOKEN));
  // The service's own code is loaded only by a command that opens the store.
  const { withStoreOperator } = await import('./store-operator.js');
  return withStoreOperator(work);
}
