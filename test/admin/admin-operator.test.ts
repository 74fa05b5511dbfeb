import { randomUUID } from 'node:crypto';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers.js';

// The admin routes the operator's CLI works through (`--url`): lists of accounts and keys,
// invites, dead jobs.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

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

function fieldsOf(res: LightMyRequestResponse): string[] {
  return (res.json().error.details as { field: string }[]).map((d) => d.field);
}

async function newAccount(name = 'Acme') {
  return t.services.accounts.createAccount({ name, plan: 'growth', rate_limit_per_minute: null });
}

describe('admin token on the operator routes', () => {
  it.each([
    ['GET', '/admin/accounts'],
    ['GET', '/admin/accounts/acc_x/api-keys'],
    ['POST', '/admin/accounts/acc_x/invites'],
    ['GET', '/admin/jobs/dead'],
    ['POST', '/admin/jobs/job_x/retry'],
  ] as const)('%s %s answers 401 without the token or with a wrong one', async (method, url) => {
    for (const headers of [
      {},
      { authorization: 'Bearer wrong-token' },
      { authorization: ADMIN_TOKEN },
    ]) {
      const res = await t.app.inject({ method, url, headers });
      expectError(res, 401, 'unauthorized');
    }
  });
});

describe('GET /admin/accounts', () => {
  it('lists every account newest first in the list envelope, with its exact total', async () => {
    const older = await newAccount('Older');
    t.clock.advance(1);
    const newer = await newAccount('Newer');
    const res = await admin({ method: 'GET', url: '/admin/accounts?limit=100' });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<{
      data: { id: string; created_at: string }[];
      total: number;
      page: number;
    }>();
    expect(Object.keys(body).sort()).toEqual(['data', 'page', 'total']);
    expect(body.page).toBe(1);
    const { n } = await t.db
      .selectFrom('accounts')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    expect(body.total).toBe(Number(n));
    const ids = body.data.map((a) => a.id);
    expect(ids.indexOf(newer.id)).toBeGreaterThanOrEqual(0);
    expect(ids.indexOf(newer.id)).toBeLessThan(ids.indexOf(older.id));
    expect(body.data.find((a) => a.id === older.id)).toEqual(older);
    const order = body.data.map((a) => [a.created_at, a.id].join(' '));
    expect(order).toEqual([...order].sort().reverse());

    const second = await admin({ method: 'GET', url: '/admin/accounts?page=2&limit=1' });
    expect(second.json()).toEqual({ data: [body.data[1]], total: body.total, page: 2 });
    const beyond = await admin({ method: 'GET', url: '/admin/accounts?page=10000000&limit=100' });
    expect(beyond.json()).toEqual({ data: [], total: body.total, page: 10_000_000 });
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['page=0', 'page'],
    ['page=x', 'page'],
    ['plan=growth', 'plan'],
  ])('refuses ?%s with 422 naming the parameter', async (query, field) => {
    const res = await admin({ method: 'GET', url: `/admin/accounts?${query}` });
    expectError(res, 422, 'validation_error');
    expect(fieldsOf(res)).toContain(field);
  });
});

describe('GET /admin/accounts/{id}/api-keys', () => {
  it("lists the account's live keys, newest first, without the keys", async () => {
    const acc = await newAccount();
    const empty = await admin({ method: 'GET', url: `/admin/accounts/${acc.id}/api-keys` });
    expect(empty.statusCode, empty.body).toBe(200);
    expect(empty.json()).toEqual({ data: [] });
    const first = await t.services.accounts.createApiKey(acc.id, 'first');
    t.clock.advance(1);
    const second = await t.services.accounts.createApiKey(acc.id, null);
    t.clock.advance(1);
    const revoked = await t.services.accounts.createApiKey(acc.id, 'gone');
    await t.services.accounts.revokeApiKey(revoked.id);
    const other = await newAccount('Other');
    await t.services.accounts.createApiKey(other.id, 'not theirs');

    const res = await admin({ method: 'GET', url: `/admin/accounts/${acc.id}/api-keys` });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      data: [
        { id: second.id, name: null, created_at: second.created_at },
        { id: first.id, name: 'first', created_at: first.created_at },
      ],
    });
    expect(res.body).not.toContain(first.api_key);
    expect(res.body).not.toContain('key_hash');
  });

  it('answers 404 for an unknown account', async () => {
    expectError(
      await admin({ method: 'GET', url: '/admin/accounts/acc_unknown/api-keys' }),
      404,
      'not_found',
    );
  });
});

describe('POST /admin/accounts/{id}/invites', () => {
  it('answers 201 with the user and a link; again for the same email, a new link for that user', async () => {
    const acc = await newAccount();
    const email = `${randomUUID()}@example.com`;
    const res = await admin({
      method: 'POST',
      url: `/admin/accounts/${acc.id}/invites`,
      payload: { email, role: 'admin', name: 'Olive' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const made = res.json<{ user_id: string; invite_url: string; expires_at: string }>();
    expect(Object.keys(made).sort()).toEqual(['expires_at', 'invite_url', 'user_id']);
    expect(made.invite_url).toMatch(/\/app\/invite#token=[\w-]{43}$/);
    const again = await admin({
      method: 'POST',
      url: `/admin/accounts/${acc.id}/invites`,
      payload: { email, role: 'agent' },
    });
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().user_id).toBe(made.user_id);
    expect(again.json().invite_url).not.toBe(made.invite_url);
  });

  it('answers 404 for an unknown account', async () => {
    expectError(
      await admin({
        method: 'POST',
        url: '/admin/accounts/acc_unknown/invites',
        payload: { email: 'a@example.com', role: 'agent' },
      }),
      404,
      'not_found',
    );
  });

  it('refuses a bad email, a bad role, a missing body and an unknown field with 422, one entry per field', async () => {
    const acc = await newAccount();
    const url = `/admin/accounts/${acc.id}/invites`;
    const bad = await admin({
      method: 'POST',
      url,
      payload: { email: 'not an email', role: 'owner' },
    });
    expectError(bad, 422, 'validation_error');
    expect(fieldsOf(bad).sort()).toEqual(['email', 'role']);
    expectError(await admin({ method: 'POST', url }), 422, 'validation_error');
    const extra = await admin({
      method: 'POST',
      url,
      payload: { email: 'a@example.com', role: 'agent', team: 'x' },
    });
    expectError(extra, 422, 'validation_error');
    expect(fieldsOf(extra)).toContain('team');
  });
});

describe('GET /admin/jobs/dead and POST /admin/jobs/{id}/retry', () => {
  async function deadJob(account: string, died: Date, error: string) {
    const id = `job_adm_${randomUUID().slice(0, 12)}`;
    await t.db
      .insertInto('jobs')
      .values({
        account_id: account,
        id,
        kind: 'broadcast.send',
        payload: JSON.stringify({ v: 1, broadcast_id: 'bc_gone' }),
        run_at: died,
        attempts: 6,
        last_error: error,
        created_at: died,
        dead_at: died,
      })
      .execute();
    return id;
  }

  it('lists dead jobs newest first, for one account and up to a limit, and puts one back', async () => {
    const account = `acc_adm_${randomUUID().slice(0, 8)}`;
    const other = `acc_adm_${randomUUID().slice(0, 8)}`;
    try {
      const old = await deadJob(account, new Date('2030-01-01T00:00:00.000Z'), 'first');
      const recent = await deadJob(account, new Date('2030-01-02T00:00:00.000Z'), 'second');
      await deadJob(other, new Date('2030-01-03T00:00:00.000Z'), 'not this account');
      await t.db
        .insertInto('jobs')
        .values({
          account_id: account,
          id: `job_adm_live_${randomUUID().slice(0, 8)}`,
          kind: 'broadcast.send',
          payload: JSON.stringify({ v: 1 }),
          run_at: new Date('2100-01-01T00:00:00.000Z'),
          created_at: new Date(),
          last_error: null,
          locked_until: null,
          dead_at: null,
        })
        .execute();

      const res = await admin({ method: 'GET', url: `/admin/jobs/dead?account_id=${account}` });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({
        data: [
          {
            id: recent,
            account_id: account,
            kind: 'broadcast.send',
            payload: { v: 1, broadcast_id: 'bc_gone' },
            attempts: 6,
            died_at: '2030-01-02T00:00:00.000Z',
            last_error: 'second',
            created_at: '2030-01-02T00:00:00.000Z',
          },
          expect.objectContaining({ id: old, last_error: 'first' }),
        ],
      });
      const one = await admin({
        method: 'GET',
        url: `/admin/jobs/dead?account_id=${account}&limit=1`,
      });
      expect(one.json().data.map((j: { id: string }) => j.id)).toEqual([recent]);
      const all = await admin({ method: 'GET', url: '/admin/jobs/dead?limit=1000' });
      const allIds = all.json().data.map((j: { account_id: string }) => j.account_id);
      expect(allIds).toContain(other);

      const retried = await admin({ method: 'POST', url: `/admin/jobs/${old}/retry` });
      expect(retried.statusCode, retried.body).toBe(200);
      expect(retried.json()).toEqual({ id: old, kind: 'broadcast.send', account_id: account });
      const row = await t.db
        .selectFrom('jobs')
        .select(['dead_at', 'attempts'])
        .where('id', '=', old)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ dead_at: null, attempts: 0 });
      const after = await admin({ method: 'GET', url: `/admin/jobs/dead?account_id=${account}` });
      expect(after.json().data.map((j: { id: string }) => j.id)).toEqual([recent]);

      // Retried already, unknown, or alive: not a dead job.
      expectError(
        await admin({ method: 'POST', url: `/admin/jobs/${old}/retry` }),
        404,
        'not_found',
      );
      expectError(
        await admin({ method: 'POST', url: '/admin/jobs/job_unknown/retry' }),
        404,
        'not_found',
      );
    } finally {
      await t.db.deleteFrom('jobs').where('account_id', 'in', [account, other]).execute();
    }
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['limit=ten', 'limit'],
    ['account_id=', 'account_id'],
    ['kind=broadcast.send', 'kind'],
  ])('refuses ?%s with 422 naming the parameter', async (query, field) => {
    const res = await admin({ method: 'GET', url: `/admin/jobs/dead?${query}` });
    expectError(res, 422, 'validation_error');
    expect(fieldsOf(res)).toContain(field);
  });
});
