import { describe, expect, inject, it } from 'vitest';
import { runCli, startService } from './process.js';

describe('switchboard CLI', () => {
  it('creates an account and a working API key, and revokes it', async () => {
    const env = { DATABASE_URL: inject('databaseUrl') };
    const account = await runCli(env, ['accounts', 'create', '--name', 'From CLI', '--plan', 'enterprise', '--rate-limit', '900', '--json']);
    expect(account.code, account.stderr).toBe(0);
    const acc = JSON.parse(account.stdout) as { id: string; plan: string; rate_limit_per_minute: number };
    expect(acc).toMatchObject({ plan: 'enterprise', rate_limit_per_minute: 900 });

    const created = await runCli(env, ['api-keys', 'create', '--account', acc.id, '--name', 'ci', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; api_key: string };

    const service = await startService(env, ['serve', '--no-workers']);
    try {
      const ok = await fetch(`${service.base}/v1/contacts`, { headers: { authorization: `Bearer ${key.api_key}` } });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('x-ratelimit-limit')).toBe('900');
      const revoked = await runCli(env, ['api-keys', 'revoke', key.id]);
      expect(revoked.code, revoked.stderr).toBe(0);
      const refused = await fetch(`${service.base}/v1/contacts`, { headers: { authorization: `Bearer ${key.api_key}` } });
      expect(refused.status).toBe(401);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  });

  it('refuses a bad plan with a clear message', async () => {
    const result = await runCli({ DATABASE_URL: inject('databaseUrl') }, ['accounts', 'create', '--name', 'X', '--plan', 'gold']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/must be starter, growth or enterprise/);
  });
});
