import type { Account, ApiKey, IssuedKey } from '../accounts/accounts.service.js';
import type { Plan, UserRole } from '../db/schema.js';
import type { PageResult } from '../http/pagination.js';
import type { DeadJob } from '../jobs/dead-jobs.js';
import { CliError } from './common.js';
import type { AccountPatch, Invite, Operator, RetriedJob } from './operator.js';

interface ErrorBody {
  error?: { code?: string; message?: string; details?: { field: string; issue: string }[] };
}

function causeOf(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as { code?: string } | undefined) : undefined;
  if (cause?.code) return cause.code;
  return err instanceof Error ? err.message : String(err);
}

/** The operator's commands through a running service's admin API (`--url`, `ADMIN_TOKEN`). */
export class AdminClient implements Operator {
  private readonly token: string;
  private readonly base: string;

  constructor(url: string, token: string | undefined) {
    if (!token) {
      throw new CliError(
        "ADMIN_TOKEN is not set: --url works through the service's admin API, with the service's ADMIN_TOKEN in the environment",
      );
    }
    this.token = token;
    this.base = url.replace(/\/+$/, '');
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.base}/admin${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new CliError(
        `cannot reach the service at ${this.base} (${causeOf(err)}): is it running?`,
      );
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new CliError(`unexpected answer from ${this.base}: HTTP ${res.status}, not JSON`);
    }
    if (res.ok) return parsed as T;
    const error = (parsed as ErrorBody).error ?? {};
    if (res.status === 401) {
      throw new CliError(
        `the service at ${this.base} refused ADMIN_TOKEN (401): set it to the service's ADMIN_TOKEN`,
      );
    }
    if (res.status === 404 && error.message?.startsWith('no route for')) {
      throw new CliError(
        `the service at ${this.base} has no admin API: it is served only when the service has ADMIN_TOKEN set`,
      );
    }
    const details = (error.details ?? []).map((d) => `${d.field}: ${d.issue}`).join('; ');
    throw new CliError(`${error.message ?? `HTTP ${res.status}`}${details ? ` (${details})` : ''}`);
  }

  createAccount(input: { name: string; plan: Plan; rate_limit_per_minute: number | null }) {
    return this.call<Account>('POST', '/accounts', input);
  }
  updateAccount(id: string, patch: AccountPatch) {
    return this.call<Account>('PATCH', `/accounts/${encodeURIComponent(id)}`, patch);
  }
  getAccount(id: string) {
    return this.call<Account>('GET', `/accounts/${encodeURIComponent(id)}`);
  }
  listAccounts(page: { page: number; limit: number }) {
    return this.call<PageResult<Account>>('GET', `/accounts?page=${page.page}&limit=${page.limit}`);
  }
  createApiKey(accountId: string, name: string | null) {
    return this.call<IssuedKey>(
      'POST',
      `/accounts/${encodeURIComponent(accountId)}/api-keys`,
      name === null ? {} : { name },
    );
  }
  async listApiKeys(accountId: string) {
    const list = await this.call<{ data: ApiKey[] }>(
      'GET',
      `/accounts/${encodeURIComponent(accountId)}/api-keys`,
    );
    return list.data;
  }
  async revokeApiKey(id: string) {
    await this.call('DELETE', `/api-keys/${encodeURIComponent(id)}`);
  }
  invite(accountId: string, input: { email: string; role: UserRole; name?: string }) {
    return this.call<Invite>('POST', `/accounts/${encodeURIComponent(accountId)}/invites`, input);
  }
  async deadJobs(opts: { accountId?: string; limit: number }) {
    const query = new URLSearchParams({ limit: String(opts.limit) });
    if (opts.accountId !== undefined) query.set('account_id', opts.accountId);
    return (await this.call<{ data: DeadJob[] }>('GET', `/jobs/dead?${query.toString()}`)).data;
  }
  retryJob(id: string) {
    return this.call<RetriedJob>('POST', `/jobs/${encodeURIComponent(id)}/retry`);
  }
}
