#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { AccountsRepository, type KeyOwner } from './accounts/accounts.repository.js';
import { ReadCache } from './db/read-cache.js';
import { AccountsService, type Account } from './accounts/accounts.service.js';
import { systemClock } from './clock.js';
import { registerDemo } from './cli/demo.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import type { Db } from './db/database.js';
import type { Plan, UserRole } from './db/schema.js';
import { Transactor } from './db/transactor.js';
import { AppError } from './errors.js';
import { DeadJobs, type DeadJob } from './jobs/dead-jobs.js';
import { serve } from './main.js';
import { openStore } from './server.js';
import { InvitesRepository } from './users/invites.repository.js';
import { SessionsRepository } from './users/sessions.repository.js';
import { UsersRepository } from './users/users.repository.js';
import { UsersService } from './users/users.service.js';

function plan(value: string): Plan {
  if (value !== 'starter' && value !== 'growth' && value !== 'enterprise') {
    throw new InvalidArgumentError('must be starter, growth or enterprise');
  }
  return value;
}

function role(value: string): UserRole {
  if (value !== 'admin' && value !== 'agent')
    throw new InvalidArgumentError('must be admin or agent');
  return value;
}

function positiveInt(value: string): number {
  if (!/^[1-9]\d{0,6}$/.test(value))
    throw new InvalidArgumentError('must be a whole number from 1');
  return Number(value);
}

// Commander stores a parser's null as '', so the plan's figure travels as 'plan'.
function rateLimitOrPlan(value: string): number | 'plan' {
  return value === 'plan' ? 'plan' : positiveInt(value);
}

function describeAccount(what: string, a: Account): string {
  const limit =
    a.rate_limit_per_minute === null
      ? "the plan's rate limit"
      : `${a.rate_limit_per_minute} requests/min per key`;
  return `${what} ${a.id} (${a.name}, ${a.plan}, ${limit})`;
}

/** Runs `work` against the configured store (embedded under DATA_DIR, or DATABASE_URL). */
async function withStore<T>(work: (db: Db, config: Config) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const store = await openStore(config);
  try {
    return await work(store.db, config);
  } finally {
    await store.close();
  }
}

function accountsOf(db: Db): AccountsService {
  // A one-off command caches nothing (the cache stays disabled); running services hear of its
  // changes through the change feed.
  const cache = new ReadCache<KeyOwner>({ maxEntries: 1, ttlMs: 0 });
  return new AccountsService({
    db,
    accounts: new AccountsRepository(db),
    clock: systemClock,
    cache,
  });
}

async function withAccounts<T>(work: (accounts: AccountsService) => Promise<T>): Promise<T> {
  return withStore((db) => work(accountsOf(db)));
}

/** Runs `work` with the users of the configured store (invites; nothing that needs a request). */
async function withUsers<T>(
  work: (users: UsersService, accounts: AccountsService) => Promise<T>,
): Promise<T> {
  return withStore((db, config) => {
    const users = new UsersService({
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
    return work(users, accountsOf(db));
  });
}

/** Runs `work` on the dead jobs of the configured store. */
async function withDeadJobs<T>(work: (jobs: DeadJobs) => Promise<T>): Promise<T> {
  return withStore((db) => work(new DeadJobs({ db, clock: systemClock })));
}

function describeDeadJob(j: DeadJob): string {
  // One line per job; an error is cut to its first line so the list stays a list.
  const error = (j.last_error ?? '').split('\n')[0]!;
  return `${j.id}  ${j.account_id}  ${j.kind}  attempts ${j.attempts}  died ${j.died_at}  ${error}`;
}

function print(json: boolean, value: object, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

const program = new Command('switchboard').description('Switchboard messaging service');

program
  .command('serve', { isDefault: true })
  .description('run the HTTP API and the background workers')
  .option(
    '--no-workers',
    'run only the HTTP API (scale workers separately with `switchboard worker`)',
  )
  .action((opts: { workers: boolean }) => serve({ api: true, workers: opts.workers }));

program
  .command('worker')
  .description(
    'run only the background workers (needs DATABASE_URL to share a database with the API)',
  )
  .action(() => serve({ api: false, workers: true }));

program
  .command('migrate')
  .description('apply pending database migrations and exit')
  .action(() =>
    withAccounts(async () => {
      process.stdout.write('migrations applied\n');
    }),
  );

const accounts = program.command('accounts').description('manage accounts');
accounts
  .command('create')
  .requiredOption('--name <name>', 'account name')
  .requiredOption('--plan <plan>', 'starter, growth or enterprise', plan)
  .option('--rate-limit <n>', 'requests per minute per key, overriding the plan', positiveInt)
  .option('--json', 'print JSON')
  .action((opts: { name: string; plan: Plan; rateLimit?: number; json?: boolean }) =>
    withAccounts(async (svc) => {
      const account = await svc.createAccount({
        name: opts.name,
        plan: opts.plan,
        rate_limit_per_minute: opts.rateLimit ?? null,
      });
      print(!!opts.json, account, `created ${account.id} (${account.name}, ${account.plan})`);
    }),
  );

accounts
  .command('update')
  .argument('<id>', 'account id (acc_…)')
  .option('--name <name>', 'new name')
  .option('--plan <plan>', 'starter, growth or enterprise (applies to existing keys at once)', plan)
  .option(
    '--rate-limit <n>',
    'requests per minute per key, or "plan" for the plan\'s figure',
    rateLimitOrPlan,
  )
  .option('--json', 'print JSON')
  .action(
    (
      id: string,
      opts: { name?: string; plan?: Plan; rateLimit?: number | 'plan'; json?: boolean },
    ) =>
      withAccounts(async (svc) => {
        const account = await svc.updateAccount(id, {
          ...(opts.name !== undefined && { name: opts.name }),
          ...(opts.plan !== undefined && { plan: opts.plan }),
          ...(opts.rateLimit !== undefined && {
            rate_limit_per_minute: opts.rateLimit === 'plan' ? null : opts.rateLimit,
          }),
        });
        print(!!opts.json, account, describeAccount('updated', account));
      }),
  );
accounts
  .command('get')
  .argument('<id>', 'account id (acc_…)')
  .option('--json', 'print JSON')
  .action((id: string, opts: { json?: boolean }) =>
    withAccounts(async (svc) => {
      const account = await svc.getAccount(id);
      print(!!opts.json, account, describeAccount('account', account));
    }),
  );

const keys = program.command('api-keys').description('manage API keys');
keys
  .command('create')
  .requiredOption('--account <id>', 'account id (acc_…)')
  .option('--name <name>', 'a label for the key')
  .option('--json', 'print JSON')
  .action((opts: { account: string; name?: string; json?: boolean }) =>
    withAccounts(async (svc) => {
      const key = await svc.createApiKey(opts.account, opts.name ?? null);
      print(!!opts.json, key, `created ${key.id}; API key (shown only now): ${key.api_key}`);
    }),
  );
keys
  .command('revoke')
  .argument('<id>', 'key id (key_…)')
  .action((id: string) =>
    withAccounts(async (svc) => svc.revokeApiKey(id).then(() => print(false, {}, `revoked ${id}`))),
  );

const users = program.command('users').description('people who sign in to the inbox');
users
  .command('invite')
  .description(
    'print an invite link (7 days, one use) for a user of the account: a new user, or a new link for the one with that email',
  )
  .requiredOption('--account <id>', 'account id (acc_…)')
  .requiredOption('--email <email>', "the user's email")
  .option('--role <role>', 'admin or agent', role, 'agent')
  .option('--name <name>', "the user's name (else they give it when accepting)")
  .option('--json', 'print JSON')
  .action(
    (opts: { account: string; email: string; role: UserRole; name?: string; json?: boolean }) =>
      withUsers(async (svc, accounts) => {
        await accounts.getAccount(opts.account);
        const invite = await svc.inviteByEmail(opts.account, {
          email: opts.email,
          role: opts.role,
          ...(opts.name !== undefined && { name: opts.name }),
        });
        print(
          !!opts.json,
          invite,
          `invite for ${opts.email} (${invite.user_id}, ${opts.role}), valid until ${invite.expires_at}:\n  ${invite.invite_url}`,
        );
      }),
  );

const jobs = program.command('jobs').description('inspect and retry background jobs');
jobs
  .command('dead')
  .description('list jobs whose retries ran out, newest first, with their last error')
  .option('--account <id>', "only this account's (acc_…)")
  .option('--limit <n>', 'at most this many (default 100)', positiveInt)
  .option('--json', 'print JSON')
  .action((opts: { account?: string; limit?: number; json?: boolean }) =>
    withDeadJobs(async (dead) => {
      const list = await dead.list({ accountId: opts.account, limit: opts.limit ?? 100 });
      print(
        !!opts.json,
        list,
        list.length === 0 ? 'no dead jobs' : list.map(describeDeadJob).join('\n'),
      );
    }),
  );
jobs
  .command('retry')
  .description('put a dead job back in the queue, due now, with a fresh retry schedule')
  .argument('<id>', 'job id (job_…)')
  .option('--json', 'print JSON')
  .action((id: string, opts: { json?: boolean }) =>
    withDeadJobs(async (dead) => {
      const job = await dead.retry(id);
      print(!!opts.json, job, `queued ${job.id} (${job.kind}) again`);
    }),
  );

registerDemo(program);

program.parseAsync().catch((err: unknown) => {
  const message =
    err instanceof ConfigError
      ? `configuration error: ${err.message}`
      : err instanceof AppError
        ? err.message
        : String(err);
  process.stderr.write(`switchboard: ${message}\n`);
  process.exit(1);
});
