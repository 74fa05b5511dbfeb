import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type ServiceProcess } from './process.js';
import { testDatabaseUrl } from '../database.js';

const ADMIN = 'e2e-admin-token-0123456789';

// Two API processes on one database and one Redis count one rate limit together.
describe('scale-out', () => {
  const services: ServiceProcess[] = [];
  beforeAll(async () => {
    const env = {
      DATABASE_URL: testDatabaseUrl(),
      REDIS_URL: 'redis://127.0.0.1:6379',
      ADMIN_TOKEN: ADMIN,
    };
    services.push(
      await startService(env, ['serve', '--no-workers']),
      await startService(env, ['serve', '--no-workers']),
    );
  });
  afterAll(async () => {
    for (const s of services) s.child.kill('SIGTERM');
    await Promise.all(services.map((s) => s.exited));
  });

  it('two service processes share one rolling count per key through Redis', async () => {
    const [a, b] = services as [ServiceProcess, ServiceProcess];
    const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' };
    const account = (await (
      await fetch(`${a.base}/admin/accounts`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ name: 'Scale', plan: 'growth', rate_limit_per_minute: 10 }),
      })
    ).json()) as { id: string };
    const key = (await (
      await fetch(`${a.base}/admin/accounts/${account.id}/api-keys`, {
        method: 'POST',
        headers: admin,
        body: '{}',
      })
    ).json()) as { api_key: string };
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      for (const s of [a, b]) {
        const res = await fetch(`${s.base}/v1/contacts`, {
          headers: { authorization: `Bearer ${key.api_key}` },
        });
        statuses.push(res.status);
      }
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(4);
    expect(statuses.slice(0, 10).every((s) => s === 200)).toBe(true);
  });

  it('stops gracefully on SIGTERM', async () => {
    const extra = await startService({ DATABASE_URL: testDatabaseUrl() }, ['serve']);
    extra.child.kill('SIGTERM');
    expect((await extra.exited).code).toBe(0);
  });
});
