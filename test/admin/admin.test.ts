import { createHash, randomUUID } from 'node:crypto';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function admin(opts: InjectOptions) {
  return t.app.inject({
    ...opts,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(opts.headers ?? {}) },
  });
}

function expectError(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json().error.code).toBe(code);
}

async function createAccount(payload: Record<string, unknown> = { name: 'Acme', plan: 'growth' }) {
  const res = await admin({ method: 'POST', url: '/admin/accounts', payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function createKey(accountId: string, payload?: object) {
  const res = await admin({
    method: 'POST',
    url: `/admin/accounts/${accountId}/api-keys`,
    payload,
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

describe('POST /admin/accounts', () => {
  it('answers 201 with the account; rate_limit_per_minute is null by default', async () => {
    const res = await admin({
      method: 'POST',
      url: '/admin/accounts',
      payload: { name: 'Acme', plan: 'growth' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const acc = res.json();
    expect(Object.keys(acc).sort()).toEqual([
      'created_at',
      'id',
      'name',
      'plan',
      'rate_limit_per_minute',
    ]);
    expect(acc).toMatchObject({ name: 'Acme', plan: 'growth', rate_limit_per_minute: null });
    expect(acc.id).toMatch(/^acc_/);
    expect(acc.created_at).toMatch(ISO);
  });

  it('accepts every plan and an explicit rate limit', async () => {
    for (const plan of ['starter', 'growth', 'enterprise']) {
      expect((await createAccount({ name: plan, plan })).plan).toBe(plan);
    }
    expect(
      (await createAccount({ name: 'Custom', plan: 'growth', rate_limit_per_minute: 42 }))
        .rate_limit_per_minute,
    ).toBe(42);
  });

  it.each([
    ['an unknown plan', { name: 'X', plan: 'platinum' }, 'plan'],
    ['a missing plan', { name: 'X' }, 'plan'],
    ['a missing name', { plan: 'growth' }, 'name'],
    ['an empty name', { name: '', plan: 'growth' }, 'name'],
    [
      'a zero rate limit',
      { name: 'X', plan: 'growth', rate_limit_per_minute: 0 },
      'rate_limit_per_minute',
    ],
    [
      'a fractional rate limit',
      { name: 'X', plan: 'growth', rate_limit_per_minute: 1.5 },
      'rate_limit_per_minute',
    ],
    ['an unknown field', { name: 'X', plan: 'growth', owner: 'me' }, 'owner'],
  ])('refuses %s with 422 validation_error', async (_label, payload, field) => {
    const res = await admin({ method: 'POST', url: '/admin/accounts', payload });
    expectError(res, 422, 'validation_error');
    expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain(field);
  });
});

describe('PATCH /admin/accounts/{id}', () => {
  it('changes name, plan and rate limit, keeping what is omitted; null returns to the plan figure', async () => {
    const acc = await createAccount();
    const renamed = await admin({
      method: 'PATCH',
      url: `/admin/accounts/${acc.id}`,
      payload: { name: 'Renamed' },
    });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toEqual({ ...acc, name: 'Renamed' });
    const upgraded = await admin({
      method: 'PATCH',
      url: `/admin/accounts/${acc.id}`,
      payload: { plan: 'enterprise', rate_limit_per_minute: 900 },
    });
    expect(upgraded.json()).toEqual({
      ...acc,
      name: 'Renamed',
      plan: 'enterprise',
      rate_limit_per_minute: 900,
    });
    const reset = await admin({
      method: 'PATCH',
      url: `/admin/accounts/${acc.id}`,
      payload: { rate_limit_per_minute: null },
    });
    expect(reset.json()).toMatchObject({ plan: 'enterprise', rate_limit_per_minute: null });
    const got = await admin({ method: 'GET', url: `/admin/accounts/${acc.id}` });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(reset.json());
  });

  it('refuses a bad plan with 422 and leaves the account unchanged', async () => {
    const acc = await createAccount();
    expectError(
      await admin({ method: 'PATCH', url: `/admin/accounts/${acc.id}`, payload: { plan: 'free' } }),
      422,
      'validation_error',
    );
    expect((await admin({ method: 'GET', url: `/admin/accounts/${acc.id}` })).json()).toEqual(acc);
  });

  it('answers 404 for an unknown account', async () => {
    expectError(
      await admin({ method: 'PATCH', url: '/admin/accounts/acc_unknown', payload: { name: 'X' } }),
      404,
      'not_found',
    );
    expectError(
      await admin({ method: 'GET', url: '/admin/accounts/acc_unknown' }),
      404,
      'not_found',
    );
  });
});

describe('API keys', () => {
  it('issues a key with 201, shows api_key once, and stores only its SHA-256', async () => {
    const acc = await createAccount();
    const key = await createKey(acc.id, { name: 'ci' });
    expect(Object.keys(key).sort()).toEqual(['api_key', 'created_at', 'id', 'name']);
    expect(key.id).toMatch(/^key_/);
    expect(key.name).toBe('ci');
    expect(typeof key.api_key).toBe('string');
    expect(key.api_key.length).toBeGreaterThanOrEqual(32);

    const rows = await t.db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', acc.id)
      .execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.key_hash).toBe(createHash('sha256').update(key.api_key).digest('hex'));
    // No column holds the key itself, or any large piece of it.
    const stored = JSON.stringify(rows);
    expect(stored).not.toContain(key.api_key);
    expect(stored).not.toContain(key.api_key.slice(-16));

    // The key works, and no read shows it again.
    const use = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: `Bearer ${key.api_key}` },
    });
    expect(use.statusCode).toBe(200);
    const account = await admin({ method: 'GET', url: `/admin/accounts/${acc.id}` });
    expect(account.body).not.toContain(key.api_key);
  });

  it('issues distinct keys, with or without a name', async () => {
    const acc = await createAccount();
    const a = await createKey(acc.id);
    const b = await createKey(acc.id, {});
    expect(a.name).toBeNull();
    expect(b.name).toBeNull();
    expect(a.api_key).not.toBe(b.api_key);
    expect(a.id).not.toBe(b.id);
  });

  it('answers 404 when issuing a key for an unknown account, and stores nothing', async () => {
    expectError(
      await admin({ method: 'POST', url: '/admin/accounts/acc_unknown/api-keys', payload: {} }),
      404,
      'not_found',
    );
    const rows = await t.db
      .selectFrom('api_keys')
      .select('id')
      .where('account_id', '=', 'acc_unknown')
      .execute();
    expect(rows).toHaveLength(0);
  });

  it('revokes a key with DELETE: 200 { success: true }, then the key is refused with 401', async () => {
    const acc = await createAccount();
    const key = await createKey(acc.id);
    const del = await admin({ method: 'DELETE', url: `/admin/api-keys/${key.id}` });
    expect(del.statusCode, del.body).toBe(200);
    expect(del.json()).toEqual({ success: true });
    const use = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: `Bearer ${key.api_key}` },
    });
    expectError(use, 401, 'unauthorized');
    // Revoking again is harmless.
    expect((await admin({ method: 'DELETE', url: `/admin/api-keys/${key.id}` })).statusCode).toBe(
      200,
    );
  });

  it('answers 404 when revoking an unknown key', async () => {
    expectError(
      await admin({ method: 'DELETE', url: '/admin/api-keys/key_unknown' }),
      404,
      'not_found',
    );
  });
});

describe('admin authentication', () => {
  const refusedName = `refused-${randomUUID()}`;
  const paths: InjectOptions[] = [
    { method: 'POST', url: '/admin/accounts', payload: { name: refusedName, plan: 'growth' } },
    { method: 'GET', url: '/admin/accounts/acc_x' },
    { method: 'PATCH', url: '/admin/accounts/acc_x', payload: { name: 'Y' } },
    { method: 'POST', url: '/admin/accounts/acc_x/api-keys', payload: {} },
    { method: 'DELETE', url: '/admin/api-keys/key_x' },
  ];

  it('answers 401 unauthorized without a token', async () => {
    for (const opts of paths) expectError(await t.app.inject(opts), 401, 'unauthorized');
  });

  it('answers 401 unauthorized with a wrong token, an API key, or another scheme', async () => {
    const acc = await createAccount();
    const key = await createKey(acc.id);
    for (const authorization of [
      'Bearer wrong-token',
      `Bearer ${ADMIN_TOKEN}x`,
      `Bearer ${ADMIN_TOKEN.slice(0, -1)}`,
      `Bearer ${key.api_key}`,
      `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}`,
      ADMIN_TOKEN,
    ]) {
      for (const opts of paths) {
        expectError(
          await t.app.inject({ ...opts, headers: { authorization } }),
          401,
          'unauthorized',
        );
      }
    }
    const created = await t.db
      .selectFrom('accounts')
      .select('id')
      .where('name', '=', refusedName)
      .execute();
    expect(created).toHaveLength(0);
  });

  it('does not accept the admin token as an API key', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expectError(res, 401, 'unauthorized');
  });
});

describe('admin API disabled', () => {
  it('answers 404 not_found on every /admin path when no admin token is configured', async () => {
    const off = await startTestApp({ adminToken: null });
    try {
      const requests: InjectOptions[] = [
        { method: 'POST', url: '/admin/accounts', payload: { name: 'X', plan: 'growth' } },
        { method: 'GET', url: '/admin/accounts/acc_x' },
        { method: 'PATCH', url: '/admin/accounts/acc_x', payload: { name: 'Y' } },
        { method: 'POST', url: '/admin/accounts/acc_x/api-keys', payload: {} },
        { method: 'DELETE', url: '/admin/api-keys/key_x' },
        { method: 'GET', url: '/admin/accounts' },
        { method: 'GET', url: '/admin/accounts/acc_x/api-keys' },
        { method: 'GET', url: '/admin/jobs/dead' },
        { method: 'POST', url: '/admin/jobs/job_x/retry' },
        { method: 'GET', url: '/admin' },
      ];
      for (const opts of requests) {
        for (const headers of [
          {},
          { authorization: `Bearer ${ADMIN_TOKEN}` },
          { authorization: 'Bearer ' },
        ]) {
          const res = await off.app.inject({ ...opts, headers });
          expectError(res, 404, 'not_found');
        }
      }
    } finally {
      await off.close();
    }
  });
});
