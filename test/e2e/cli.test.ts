import { describe, expect, inject, it } from 'vitest';
import { runCli, startService } from './process.js';

describe('switchboard CLI', () => {
  it('creates an account and a working API key, and revokes it', async () => {
    const env = { DATABASE_URL: inject('databaseUrl') };
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

  it("changes an account's plan and rate limit, returns it to the plan's figure, and shows it", async () => {
    const env = { DATABASE_URL: inject('databaseUrl') };
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
    const result = await runCli({ DATABASE_URL: inject('databaseUrl') }, [
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
});
