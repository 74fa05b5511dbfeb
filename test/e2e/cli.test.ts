import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createDb } from '../../src/db/database.js';
import { runCli, startService } from './process.js';
import { testDatabaseUrl } from '../database.js';

describe('switchboard CLI', () => {
  it('creates an account and a working API key, and revokes it', async () => {
    const env = { DATABASE_URL: testDatabaseUrl() };
    const account = await runCli(env, [
      'accounts',
      'create',
      '--name',
      'From CLI',
      '--plan',
      'enterprise',
      '--rate-limit',
      '900',
      '--json',
    ]);
    expect(account.code, account.stderr).toBe(0);
    const acc = JSON.parse(account.stdout) as {
      id: string;
      plan: string;
      rate_limit_per_minute: number;
    };
    expect(acc).toMatchObject({ plan: 'enterprise', rate_limit_per_minute: 900 });

    const created = await runCli(env, [
      'api-keys',
      'create',
      '--account',
      acc.id,
      '--name',
      'ci',
      '--json',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; api_key: string };

    const service = await startService(env, ['serve', '--no-workers']);
    try {
      const ok = await fetch(`${service.base}/v1/contacts`, {
        headers: { authorization: `Bearer ${key.api_key}` },
      });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('x-ratelimit-limit')).toBe('900');
      const revoked = await runCli(env, ['api-keys', 'revoke', key.id]);
      expect(revoked.code, revoked.stderr).toBe(0);
      const refused = await fetch(`${service.base}/v1/contacts`, {
        headers: { authorization: `Bearer ${key.api_key}` },
      });
      expect(refused.status).toBe(401);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  });

  it('users invite prints a link that signs the user in; again for the same email, a new link for that user', async () => {
    const env = { DATABASE_URL: testDatabaseUrl() };
    const account = await runCli(env, [
      'accounts',
      'create',
      '--name',
      'Inbox',
      '--plan',
      'starter',
      '--json',
    ]);
    const id = (JSON.parse(account.stdout) as { id: string }).id;
    const email = `${randomUUID()}@example.com`;
    const invite = (extra: string[]) =>
      runCli(env, ['users', 'invite', '--account', id, '--email', email, ...extra]);
    const first = await invite(['--role', 'admin', '--name', 'Olive', '--json']);
    expect(first.code, first.stderr).toBe(0);
    const made = JSON.parse(first.stdout) as {
      user_id: string;
      invite_url: string;
      expires_at: string;
    };
    expect(made.invite_url).toMatch(/\/app\/invite#token=[\w-]{43}$/);
    const second = await invite([]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain(made.user_id);
    const link = /(http\S+#token=\S+)/.exec(second.stdout)![1]!;
    const bad = await invite(['--role', 'owner']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('must be admin or agent');

    const service = await startService(env, ['serve', '--no-workers']);
    try {
      const spent = await fetch(`${service.base}/v1/invites/accept`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          token: new URL(made.invite_url).hash.slice(7),
          password: 'long enough pw',
        }),
      });
      expect(spent.status).toBe(404); // replaced by the second link
      const accepted = await fetch(`${service.base}/v1/invites/accept`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: new URL(link).hash.slice(7), password: 'long enough pw' }),
      });
      expect(accepted.status).toBe(201);
      expect(await accepted.json()).toMatchObject({
        user: { id: made.user_id, name: 'Olive', role: 'admin' },
        account: { id, plan: 'starter' },
      });
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }, 120_000);

  it("changes an account's plan and rate limit, returns it to the plan's figure, and shows it", async () => {
    const env = { DATABASE_URL: testDatabaseUrl() };
    const created = await runCli(env, [
      'accounts',
      'create',
      '--name',
      'To change',
      '--plan',
      'growth',
      '--json',
    ]);
    const id = (JSON.parse(created.stdout) as { id: string }).id;

    const raised = await runCli(env, [
      'accounts',
      'update',
      id,
      '--plan',
      'enterprise',
      '--rate-limit',
      '2000',
      '--json',
    ]);
    expect(raised.code, raised.stderr).toBe(0);
    expect(JSON.parse(raised.stdout)).toMatchObject({
      id,
      name: 'To change',
      plan: 'enterprise',
      rate_limit_per_minute: 2000,
    });

    const back = await runCli(env, ['accounts', 'update', id, '--rate-limit', 'plan', '--json']);
    expect(JSON.parse(back.stdout)).toMatchObject({
      plan: 'enterprise',
      rate_limit_per_minute: null,
    });

    const shown = await runCli(env, ['accounts', 'get', id]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toBe(`account ${id} (To change, enterprise, the plan's rate limit)\n`);

    const missing = await runCli(env, ['accounts', 'update', 'acc_missing', '--plan', 'growth']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/account .*acc_missing.* not found|not found/);
  });

  it('refuses a bad plan with a clear message', async () => {
    const result = await runCli({ DATABASE_URL: testDatabaseUrl() }, [
      'accounts',
      'create',
      '--name',
      'X',
      '--plan',
      'gold',
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/must be starter, growth or enterprise/);
  });

  it('lists dead jobs with their last error, and puts one back with jobs retry', async () => {
    const env = { DATABASE_URL: testDatabaseUrl() };
    const db = createDb(env.DATABASE_URL, { max: 1 });
    const account = `acc_cli_${randomUUID().slice(0, 8)}`;
    const died = new Date('2030-01-02T03:04:05.000Z');
    try {
      await db
        .insertInto('jobs')
        .values({
          account_id: account,
          id: `job_cli_${randomUUID().slice(0, 8)}`,
          kind: 'broadcast.send',
          payload: JSON.stringify({ v: 1, broadcast_id: 'bc_gone' }),
          run_at: died,
          attempts: 6,
          last_error: 'invalid byte sequence for encoding "UTF8": 0x00',
          created_at: died,
          dead_at: died,
        })
        .execute();
      const { id } = await db
        .selectFrom('jobs')
        .select('id')
        .where('account_id', '=', account)
        .executeTakeFirstOrThrow();

      const listed = await runCli(env, ['jobs', 'dead', '--account', account, '--json']);
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toEqual([
        {
          id,
          account_id: account,
          kind: 'broadcast.send',
          payload: { v: 1, broadcast_id: 'bc_gone' },
          attempts: 6,
          died_at: died.toISOString(),
          last_error: 'invalid byte sequence for encoding "UTF8": 0x00',
          created_at: died.toISOString(),
        },
      ]);
      const text = await runCli(env, ['jobs', 'dead', '--account', account]);
      expect(text.stdout).toBe(
        `${id}  ${account}  broadcast.send  attempts 6  died ${died.toISOString()}  invalid byte sequence for encoding "UTF8": 0x00\n`,
      );

      const retried = await runCli(env, ['jobs', 'retry', id]);
      expect(retried.code, retried.stderr).toBe(0);
      expect(retried.stdout).toBe(`queued ${id} (broadcast.send) again\n`);
      const row = await db
        .selectFrom('jobs')
        .select(['dead_at', 'attempts'])
        .where('account_id', '=', account)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ dead_at: null, attempts: 0 });
      const none = await runCli(env, ['jobs', 'dead', '--account', account]);
      expect(none.stdout).toBe('no dead jobs\n');

      const again = await runCli(env, ['jobs', 'retry', id]);
      expect(again.code).not.toBe(0);
      expect(again.stderr).toMatch(/dead job .* not found/);
    } finally {
      await db.deleteFrom('jobs').where('account_id', '=', account).execute();
      await db.destroy();
    }
  });
});
