import type { Command } from 'commander';
import type { Account, ApiKey } from '../accounts/accounts.service.js';
import type { Plan } from '../db/schema.js';
import {
  json,
  plan,
  positiveInt,
  print,
  rateLimitOrPlan,
  remote,
  upTo,
  type Remote,
} from './common.js';
import { withOperator } from './operator.js';

function describeAccount(what: string, a: Account): string {
  const limit =
    a.rate_limit_per_minute === null
      ? "the plan's rate limit"
      : `${a.rate_limit_per_minute} requests/min per key`;
  return `${what} ${a.id} (${a.name}, ${a.plan}, ${limit})`;
}

function describeKey(k: ApiKey): string {
  return `${k.id}  ${k.name ?? '(no name)'}  created ${k.created_at}`;
}

/** `switchboard accounts …` and `switchboard api-keys …`. */
export function registerAccounts(program: Command): void {
  const accounts = program.command('accounts').description('manage accounts');

  remote(json(accounts.command('create')))
    .description('create an account')
    .requiredOption('--name <name>', 'account name')
    .requiredOption('--plan <plan>', 'starter, growth or enterprise', plan)
    .option('--rate-limit <n>', 'requests per minute per key, overriding the plan', positiveInt)
    .action((opts: Remote & { name: string; plan: Plan; rateLimit?: number; json?: boolean }) =>
      withOperator(opts, async (op) => {
        const account = await op.createAccount({
          name: opts.name,
          plan: opts.plan,
          rate_limit_per_minute: opts.rateLimit ?? null,
        });
        print(!!opts.json, account, `created ${account.id} (${account.name}, ${account.plan})`);
      }),
    );

  remote(json(accounts.command('update')))
    .description("change an account's name, plan or rate limit")
    .argument('<id>', 'account id (acc_…)')
    .option('--name <name>', 'new name')
    .option(
      '--plan <plan>',
      'starter, growth or enterprise (applies to existing keys at once)',
      plan,
    )
    .option(
      '--rate-limit <n>',
      'requests per minute per key, or "plan" for the plan\'s figure',
      rateLimitOrPlan,
    )
    .action(
      (
        id: string,
        opts: Remote & { name?: string; plan?: Plan; rateLimit?: number | 'plan'; json?: boolean },
      ) =>
        withOperator(opts, async (op) => {
          const account = await op.updateAccount(id, {
            ...(opts.name !== undefined && { name: opts.name }),
            ...(opts.plan !== undefined && { plan: opts.plan }),
            ...(opts.rateLimit !== undefined && {
              rate_limit_per_minute: opts.rateLimit === 'plan' ? null : opts.rateLimit,
            }),
          });
          print(!!opts.json, account, describeAccount('updated', account));
        }),
    );

  remote(json(accounts.command('get')))
    .description('show an account')
    .argument('<id>', 'account id (acc_…)')
    .action((id: string, opts: Remote & { json?: boolean }) =>
      withOperator(opts, async (op) => {
        const account = await op.getAccount(id);
        print(!!opts.json, account, describeAccount('account', account));
      }),
    );

  remote(json(accounts.command('list')))
    .description('list every account, newest first, a page at a time')
    .option('--page <n>', 'page number (default 1)', positiveInt)
    .option('--limit <n>', 'accounts per page, at most 100 (default 20)', upTo(100))
    .action((opts: Remote & { page?: number; limit?: number; json?: boolean }) =>
      withOperator(opts, async (op) => {
        const list = await op.listAccounts({ page: opts.page ?? 1, limit: opts.limit ?? 20 });
        const lines = list.data.map((a) => describeAccount('', a).trimStart());
        const shown = `${list.total} account${list.total === 1 ? '' : 's'}, page ${list.page}`;
        print(!!opts.json, list, [...lines, shown].join('\n'));
      }),
    );

  const keys = program.command('api-keys').description('manage API keys');

  remote(json(keys.command('create')))
    .description('issue an API key (the key is printed only now)')
    .requiredOption('--account <id>', 'account id (acc_…)')
    .option('--name <name>', 'a label for the key')
    .action((opts: Remote & { account: string; name?: string; json?: boolean }) =>
      withOperator(opts, async (op) => {
        const key = await op.createApiKey(opts.account, opts.name ?? null);
        print(!!opts.json, key, `created ${key.id}; API key (shown only now): ${key.api_key}`);
      }),
    );

  remote(json(keys.command('list')))
    .description("list an account's live API keys, newest first (never the keys themselves)")
    .requiredOption('--account <id>', 'account id (acc_…)')
    .action((opts: Remote & { account: string; json?: boolean }) =>
      withOperator(opts, async (op) => {
        const list = await op.listApiKeys(opts.account);
        print(
          !!opts.json,
          list,
          list.length === 0 ? 'no API keys' : list.map(describeKey).join('\n'),
        );
      }),
    );

  remote(keys.command('revoke'))
    .description('revoke an API key at once')
    .argument('<id>', 'key id (key_…)')
    .action((id: string, opts: Remote) =>
      withOperator(opts, async (op) => {
        await op.revokeApiKey(id);
        print(false, {}, `revoked ${id}`);
      }),
    );
}
