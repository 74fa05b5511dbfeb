import { hash, randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import { Batcher } from '../db/batcher.js';
import type { ReadCache } from '../db/read-cache.js';
import { sql } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { Plan } from '../db/schema.js';
import { Transactor, type Scope } from '../db/transactor.js';
import { Forbidden, NotFound, Unauthorized } from '../errors.js';
import type { Principal } from '../http/auth.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { AccountRow, AccountsRepository, KeyOwner } from './accounts.repository.js';

export const PLAN_RATE_LIMITS: Record<Plan, number> = { starter: 0, growth: 100, enterprise: 500 };

export interface Account {
  id: string;
  name: string;
  plan: Plan;
  rate_limit_per_minute: number | null;
  created_at: string;
}

export interface ApiKey {
  id: string;
  name: string | null;
  created_at: string;
}

export interface IssuedKey {
  id: string;
  api_key: string;
  name: string | null;
  created_at: string;
}

export function hashApiKey(apiKey: string): string {
  // The one-shot hash is about twice as fast as createHash for a key, on every request.
  return hash('sha256', apiKey, 'hex');
}

function toAccount(row: AccountRow): Account {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    rate_limit_per_minute: row.rate_limit_per_minute,
    created_at: row.created_at.toISOString(),
  };
}

/** The limit in force for a key: the account's override, else its plan's figure. */
export function effectiveRateLimit(owner: Pick<KeyOwner, 'plan' | 'rateLimitPerMinute'>): number {
  return owner.rateLimitPerMinute ?? PLAN_RATE_LIMITS[owner.plan];
}

export class AccountsService {
  private readonly owners: Batcher<string, KeyOwner | undefined>;

  constructor(
    private readonly deps: {
      db: Db;
      accounts: AccountsRepository;
      clock: Clock;
      /** Key owners by key hash; see ReadCache for how it stays correct. */
      cache: ReadCache<KeyOwner>;
    },
  ) {
    this.owners = new Batcher((hashes) => deps.accounts.findKeyOwners(hashes), {
      maxBatch: 100,
      maxConcurrent: 1,
    });
  }

  async createAccount(
    input: { name: string; plan: Plan; rate_limit_per_minute?: number | null },
    trx: Tx | Db = this.deps.db,
  ): Promise<Account> {
    const now = this.deps.clock.now();
    const row: AccountRow = {
      id: newId('acc'),
      name: input.name,
      plan: input.plan,
      rate_limit_per_minute: input.rate_limit_per_minute ?? null,
      created_at: now,
      updated_at: now,
    };
    await this.deps.accounts.insert(trx, row);
    return toAccount(row);
  }

  async updateAccount(
    id: string,
    patch: { name?: string; plan?: Plan; rate_limit_per_minute?: number | null },
  ): Promise<Account> {
    const row = await this.deps.accounts.update(id, patch, this.deps.clock.now());
    this.deps.cache.clear();
    if (!row) throw new NotFound('account', id);
    return toAccount(row);
  }

  async getAccount(id: string): Promise<Account> {
    const row = await this.deps.accounts.find(id);
    if (!row) throw new NotFound('account', id);
    return toAccount(row);
  }

  /** Issues a key; only its SHA-256 is stored, so the key itself is shown this once. */
  async createApiKey(
    accountId: string,
    name: string | null,
    trx: Tx | Db = this.deps.db,
  ): Promise<IssuedKey> {
    if (!(await this.deps.accounts.find(accountId, trx))) throw new NotFound('account', accountId);
    const apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
    const now = this.deps.clock.now();
    const id = newId('key');
    await this.deps.accounts.insertKey(trx, {
      account_id: accountId,
      id,
      name,
      key_hash: hashApiKey(apiKey),
      created_at: now,
    });
    return { id, api_key: apiKey, name, created_at: now.toISOString() };
  }

  /** A key made through the API (`POST /v1/api-keys`), with the request's idempotency record. */
  async createApiKeyFor(scope: Scope, name: string | null): Promise<IssuedKey> {
    return new Transactor(this.deps.db).run(scope, (trx) =>
      this.createApiKey(scope.accountId, name, trx),
    );
  }

  /** Every account, for the operator (`GET /admin/accounts`, `switchboard accounts list`). */
  async listAccounts(page: PageRequest): Promise<PageResult<Account>> {
    const { rows, total } = await this.deps.accounts.list(page);
    return { data: rows.map(toAccount), total, page: page.page };
  }

  async listApiKeys(scope: Scope): Promise<{ data: ApiKey[] }> {
    return this.keysOf(scope.accountId);
  }

  /** The live keys of any account, for the operator; an unknown account is a 404. */
  async listApiKeysOf(accountId: string): Promise<{ data: ApiKey[] }> {
    if (!(await this.deps.accounts.find(accountId))) throw new NotFound('account', accountId);
    return this.keysOf(accountId);
  }

  private async keysOf(accountId: string): Promise<{ data: ApiKey[] }> {
    const rows = await this.deps.accounts.listKeys(accountId);
    return {
      data: rows.map((r) => ({ id: r.id, name: r.name, created_at: r.created_at.toISOString() })),
    };
  }

  /** Revokes a key of the account (`accountId`), or of any account (the operator's tools). */
  async revokeApiKey(id: string, accountId?: string): Promise<void> {
    const found = await this.deps.accounts.revokeKey(id, this.deps.clock.now(), accountId);
    // Refused on its very next request here; other processes hear it through the change feed.
    this.deps.cache.clear();
    if (!found) throw new NotFound('api key', id);
  }

  /** The key's owner, or undefined for an unknown or revoked key; concurrent calls share a query. */
  async authenticate(apiKey: string): Promise<KeyOwner | undefined> {
    const hash = hashApiKey(apiKey);
    return this.deps.cache.get(hash, () => this.owners.submit(hash));
  }

  /** Who an API key acts for (an admin of its account, with the key's own rate limit). */
  async keyPrincipal(apiKey: string): Promise<Principal> {
    const owner = await this.authenticate(apiKey);
    if (!owner) throw new Unauthorized('API key is invalid or revoked');
    if (owner.plan === 'starter')
      throw new Forbidden('the Starter plan has no API access; upgrade to Growth or Enterprise');
    return {
      accountId: owner.accountId,
      role: 'admin',
      actor: null,
      keyId: owner.keyId,
      rate: { key: owner.keyId, limit: effectiveRateLimit(owner) },
    };
  }

  /**
   * Which of these keys no longer open the API, each with why: `revoked`, or `plan` (the
   * account moved to a plan without API access).
   */
  async endedKeys(ids: string[]): Promise<Map<string, string>> {
    const states = new Map((await this.deps.accounts.keyStates(ids)).map((k) => [k.id, k]));
    const ended = new Map<string, string>();
    for (const id of ids) {
      const state = states.get(id);
      if (!state || state.revoked) ended.set(id, 'revoked');
      else if (state.plan === 'starter') ended.set(id, 'plan');
    }
    return ended;
  }

  /** First start on an empty store: one Growth account and its key, so the service is usable at once. */
  async bootstrapDefaultAccount(): Promise<{ account: Account; key: IssuedKey } | null> {
    // One transaction under a lock: processes starting together on an empty store create one
    // account between them, and a crash cannot leave it without its key (which would never be
    // printed, since the store is no longer empty).
    return this.deps.db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext('switchboard:bootstrap'))`.execute(trx);
      if ((await this.deps.accounts.count(trx)) > 0) return null;
      const account = await this.createAccount({ name: 'Default', plan: 'growth' }, trx);
      const key = await this.createApiKey(account.id, 'default', trx);
      return { account, key };
    });
  }
}
