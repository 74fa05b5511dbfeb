import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { expectStatus } from '../inbox-helpers.js';

let sealed: TestApp;
let unsealed: TestApp;
beforeAll(async () => {
  sealed = await startTestApp({ config: { secretsKey: randomBytes(32) } });
  unsealed = await startTestApp({ config: { secretsKey: null } });
});
afterAll(async () => {
  await sealed.close();
  await unsealed.close();
});

const recordOf = async (t: TestApp, accountId: string, key: string) =>
  t.db
    .selectFrom('idempotency_keys')
    .select(['response_body', 'state'])
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirstOrThrow();

describe('replay records of answers that hold a secret', () => {
  it('are stored sealed under SECRETS_KEY, and replayed as they were', async () => {
    const acc = await newAccount(sealed);
    const cases = [
      {
        url: '/v1/api-keys',
        payload: { name: 'ci' },
        secret: (b: { api_key: string }) => b.api_key,
      },
      {
        url: '/v1/users',
        payload: { name: 'Ann', email: 'ann@example.com' },
        secret: (b: { invite_url: string }) => b.invite_url.split('#token=')[1]!,
      },
      {
        url: '/v1/webhooks',
        payload: { url: 'https://127.0.0.1:1/hook', events: ['message.received'] },
        secret: (b: { secret: string }) => b.secret,
      },
    ];
    for (const c of cases) {
      const key = `k-${Math.random()}`;
      const request = {
        method: 'POST' as const,
        url: c.url,
        payload: c.payload,
        headers: { 'idempotency-key': key },
      };
      const first = await acc.call(request);
      expectStatus(first, 201);
      const secret = c.secret(first.json());
      const record = await recordOf(sealed, acc.accountId, key);
      expect(record.state).toBe('completed');
      expect(record.response_body).toMatch(/^sealed:/);
      expect(record.response_body).not.toContain(secret);
      const again = await acc.call(request);
      expectStatus(again, 201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json()).toEqual(first.json());
    }
    // An answer without a secret is kept as it is.
    const plain = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: '+14155550140' },
      headers: { 'idempotency-key': 'plain' },
    });
    expect((await recordOf(sealed, acc.accountId, 'plain')).response_body).toBe(plain.body);
  });

  it('without SECRETS_KEY are not kept: the replay is a 409, and nothing happens twice', async () => {
    const acc = await newAccount(unsealed);
    const request = {
      method: 'POST' as const,
      url: '/v1/api-keys',
      payload: {},
      headers: { 'idempotency-key': 'once' },
    };
    expectStatus(await acc.call(request), 201);
    expect((await recordOf(unsealed, acc.accountId, 'once')).response_body).toBeNull();
    const replay = await acc.call(request);
    expectStatus(replay, 409);
    expect(replay.json().error.code).toBe('idempotency_error');
    const keys = await acc.call({ method: 'GET', url: '/v1/api-keys' });
    expect(keys.json().data).toHaveLength(2);
  });

  it('sealed under another SECRETS_KEY answer a 409, not a 500, and nothing happens twice', async () => {
    const acc = await newAccount(sealed);
    const request = {
      method: 'POST' as const,
      url: '/v1/api-keys',
      payload: { name: 'rotated' },
      headers: { 'idempotency-key': 'rotated' },
    };
    expectStatus(await acc.call(request), 201);
    // The same database, opened by a service holding another key.
    const other = await startTestApp({ config: { secretsKey: randomBytes(32) } });
    try {
      const replay = await other.app.inject({
        ...request,
        headers: { ...request.headers, authorization: `Bearer ${acc.apiKey}` },
      });
      expectStatus(replay, 409);
      expect(replay.json().error.code).toBe('idempotency_error');
    } finally {
      await other.close();
    }
    const keys = await acc.call({ method: 'GET', url: '/v1/api-keys' });
    expect(keys.json().data).toHaveLength(2);
  });
});
