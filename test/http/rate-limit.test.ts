import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRateLimiter } from '../../src/http/rate-limiter.js';
import {
  ADMIN_TOKEN,
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SKIP_REDIS = process.env.SKIP_REDIS_TESTS === '1';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

function header(res: LightMyRequestResponse, name: string): number {
  const value = res.headers[name];
  expect(value, `${name} header`).toBeDefined();
  return Number(value);
}

function expectRateLimited(res: LightMyRequestResponse, limit: number) {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json().error.code).toBe('rate_limited');
  const retryAfter = header(res, 'retry-after');
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(header(res, 'x-ratelimit-limit')).toBe(limit);
  expect(header(res, 'x-ratelimit-remaining')).toBe(0);
}

const get = (acc: TestAccount) => acc.call({ method: 'GET', url: '/v1/contacts' });

describe('rate limit (Growth plan figure)', () => {
  it('lets exactly 100 requests through, counting Remaining 99 down to 0, then answers 429', async () => {
    const acc = await newAccount(t, { rateLimit: null });
    for (let i = 1; i <= 100; i++) {
      const res = await get(acc);
      expect(res.statusCode, `request ${i}`).toBe(200);
      expect(header(res, 'x-ratelimit-limit')).toBe(100);
      expect(header(res, 'x-ratelimit-remaining'), `request ${i}`).toBe(100 - i);
      const reset = header(res, 'x-ratelimit-reset');
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
    const refused = await get(acc);
    expectRateLimited(refused, 100);
    // A 429 is not counted, and does not free anything either: the next one is refused too.
    expectRateLimited(await get(acc), 100);
  });

  it('counts 4xx answers (404, 422, 409) like any other request', async () => {
    const acc = await newAccount(t, { rateLimit: null });
    const phone = randomPhone();
    const first = await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } });
    expect(first.statusCode).toBe(201);
    for (let i = 0; i < 33; i++) {
      const res = await acc.call({ method: 'GET', url: '/v1/contacts/con_missing' });
      expect(res.statusCode).toBe(404);
    }
    for (let i = 0; i < 33; i++) {
      const res = await acc.call({ method: 'GET', url: '/v1/contacts?limit=1000' });
      expect(res.statusCode).toBe(422);
    }
    for (let i = 0; i < 32; i++) {
      const res = await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } });
      expect(res.statusCode).toBe(409);
    }
    const last = await acc.call({ method: 'GET', url: '/v1/contacts/con_missing' });
    expect(last.statusCode).toBe(404);
    expect(header(last, 'x-ratelimit-remaining')).toBe(0);
    expectRateLimited(await get(acc), 100);
  });

  it('carries the headers on error answers too', async () => {
    const acc = await newAccount(t, { rateLimit: null });
    const res = await acc.call({ method: 'GET', url: '/v1/contacts/con_missing' });
    expect(res.statusCode).toBe(404);
    expect(header(res, 'x-ratelimit-limit')).toBe(100);
    expect(header(res, 'x-ratelimit-remaining')).toBe(99);
    expect(header(res, 'x-ratelimit-reset')).toBeGreaterThanOrEqual(1);
  });

  it('counts per API key: one key used up leaves another account untouched', async () => {
    const a = await newAccount(t, { rateLimit: 3 });
    const b = await newAccount(t, { rateLimit: 3 });
    for (let i = 0; i < 3; i++) expect((await get(a)).statusCode).toBe(200);
    expectRateLimited(await get(a), 3);
    const res = await get(b);
    expect(res.statusCode).toBe(200);
    expect(header(res, 'x-ratelimit-remaining')).toBe(2);
  });

  it('applies a PATCH of rate_limit_per_minute to 5 at once, and null returns to the plan figure', async () => {
    const acc = await newAccount(t, { rateLimit: null });
    for (let i = 0; i < 3; i++) expect((await get(acc)).statusCode).toBe(200);
    const patch = await t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${acc.accountId}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { rate_limit_per_minute: 5 },
    });
    expect(patch.statusCode, patch.body).toBe(200);
    const fourth = await get(acc);
    expect(fourth.statusCode).toBe(200);
    expect(header(fourth, 'x-ratelimit-limit')).toBe(5);
    expect(header(fourth, 'x-ratelimit-remaining')).toBe(1);
    expect((await get(acc)).statusCode).toBe(200);
    expectRateLimited(await get(acc), 5);

    const back = await t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${acc.accountId}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { rate_limit_per_minute: null },
    });
    expect(back.json().rate_limit_per_minute).toBeNull();
    const again = await get(acc);
    expect(again.statusCode).toBe(200);
    expect(header(again, 'x-ratelimit-limit')).toBe(100);
    expect(header(again, 'x-ratelimit-remaining')).toBe(94);
  });

  it('shows 500 for an Enterprise account on the plan figure', async () => {
    const acc = await newAccount(t, { plan: 'enterprise', rateLimit: null });
    const res = await get(acc);
    expect(res.statusCode).toBe(200);
    expect(header(res, 'x-ratelimit-limit')).toBe(500);
    expect(header(res, 'x-ratelimit-remaining')).toBe(499);
  });

  it('applies a plan change from Growth to Enterprise to the limit at once', async () => {
    const acc = await newAccount(t, { rateLimit: null });
    expect(header(await get(acc), 'x-ratelimit-limit')).toBe(100);
    await t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${acc.accountId}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { plan: 'enterprise' },
    });
    const res = await get(acc);
    expect(header(res, 'x-ratelimit-limit')).toBe(500);
    expect(header(res, 'x-ratelimit-remaining')).toBe(498);
  });

  it('does not count requests refused before authentication', async () => {
    const acc = await newAccount(t, { rateLimit: 2 });
    const wrong = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: 'Bearer nope' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.headers['x-ratelimit-limit']).toBeUndefined();
    expect(header(await get(acc), 'x-ratelimit-remaining')).toBe(1);
  });
});

describe.skipIf(SKIP_REDIS)('rate limit shared through Redis', () => {
  it('two app instances with their own RedisRateLimiter share one count (limit 10: 6 on each → 10 allowed)', async () => {
    const keyPrefix = `sb:rl:test:${randomBytes(8).toString('hex')}:`;
    const one = await startTestApp({
      rateLimiter: new RedisRateLimiter({ url: REDIS_URL, keyPrefix }),
    });
    const two = await startTestApp({
      rateLimiter: new RedisRateLimiter({ url: REDIS_URL, keyPrefix }),
    });
    try {
      const acc = await newAccount(one, { rateLimit: 10 });
      const headers = { authorization: `Bearer ${acc.apiKey}` };
      const calls: Promise<LightMyRequestResponse>[] = [];
      for (let i = 0; i < 6; i++) {
        calls.push(one.app.inject({ method: 'GET', url: '/v1/contacts', headers }));
        calls.push(two.app.inject({ method: 'GET', url: '/v1/contacts', headers }));
      }
      const results = await Promise.all(calls);
      const statuses = results.map((r) => r.statusCode);
      expect(statuses.filter((s) => s === 200)).toHaveLength(10);
      expect(statuses.filter((s) => s === 429)).toHaveLength(2);
      for (const r of results.filter((x) => x.statusCode === 429)) expectRateLimited(r, 10);
      // Each allowed request saw a distinct remaining count: one shared log, not two.
      const remaining = results
        .filter((r) => r.statusCode === 200)
        .map((r) => header(r, 'x-ratelimit-remaining'));
      expect(remaining.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    } finally {
      await one.close();
      await two.close();
    }
  });
});

describe('rate limiter outage', () => {
  it('counts in process when the shared store is unreachable: still limited, never uncounted', async () => {
    const down = await startTestApp({
      rateLimiter: new RedisRateLimiter({
        url: 'redis://127.0.0.1:1',
        keyPrefix: `sb:test:${Date.now()}:`,
      }),
    });
    try {
      const acc = await newAccount(down, { rateLimit: 2 });
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await acc.call({ method: 'GET', url: '/v1/contacts' });
        statuses.push(res.statusCode);
        expect(header(res, 'x-ratelimit-limit')).toBe(2);
        if (res.statusCode === 429) expectRateLimited(res, 2);
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
    } finally {
      await down.close();
    }
  });
});
