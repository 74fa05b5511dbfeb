import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

function expectError(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json().error.code).toBe(code);
  expect(typeof res.json().error.message).toBe('string');
}

function admin(method: 'PATCH' | 'DELETE', url: string, payload?: object) {
  return t.app.inject({
    method,
    url,
    payload,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
}

async function createContact(acc: TestAccount, payload: Record<string, unknown> = {}) {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/contacts',
    payload: { phone: randomPhone(), ...payload },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

describe('authentication', () => {
  it('refuses a request without Authorization with 401 unauthorized', async () => {
    expectError(await t.app.inject({ method: 'GET', url: '/v1/contacts' }), 401, 'unauthorized');
    expectError(
      await t.app.inject({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: randomPhone() },
      }),
      401,
      'unauthorized',
    );
  });

  it.each([
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['Bearer without a key', 'Bearer '],
    ['Bearer alone', 'Bearer'],
    ['the bare key without a scheme', 'KEY'],
    ['a key with a space', 'Bearer KEY extra'],
    ['empty', ''],
  ])('refuses a malformed Authorization header (%s) with 401', async (_label, header) => {
    const acc = await newAccount(t);
    const value = header.replace('KEY', acc.apiKey);
    expectError(
      await t.app.inject({ method: 'GET', url: '/v1/contacts', headers: { authorization: value } }),
      401,
      'unauthorized',
    );
  });

  it('refuses an unknown key with 401', async () => {
    const acc = await newAccount(t);
    for (const key of ['sb_live_unknown', `${acc.apiKey}x`, acc.apiKey.slice(0, -1)]) {
      expectError(
        await t.app.inject({
          method: 'GET',
          url: '/v1/contacts',
          headers: { authorization: `Bearer ${key}` },
        }),
        401,
        'unauthorized',
      );
    }
  });

  it('refuses a revoked key on the very next request', async () => {
    const acc = await newAccount(t);
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).statusCode).toBe(200);
    const revoked = await admin('DELETE', `/admin/api-keys/${acc.keyId}`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    expectError(await acc.call({ method: 'GET', url: '/v1/contacts' }), 401, 'unauthorized');
    expectError(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } }),
      401,
      'unauthorized',
    );
  });

  it("revoking one key leaves the account's other keys working", async () => {
    const acc = await newAccount(t);
    const other = await t.services.accounts.createApiKey(acc.accountId, 'second');
    await admin('DELETE', `/admin/api-keys/${acc.keyId}`);
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: `Bearer ${other.api_key}` },
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('refuses the Starter plan with 403 forbidden, whatever the request', async () => {
    const acc = await newAccount(t, { plan: 'starter' });
    expectError(await acc.call({ method: 'GET', url: '/v1/contacts' }), 403, 'forbidden');
    expectError(
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } }),
      403,
      'forbidden',
    );
    expectError(await acc.call({ method: 'GET', url: '/v1/tags' }), 403, 'forbidden');
    const rows = await t.db
      .selectFrom('contacts')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(rows).toHaveLength(0);
  });

  it('applies a plan change to the existing key at once (starter → growth → starter)', async () => {
    const acc = await newAccount(t, { plan: 'starter' });
    expectError(await acc.call({ method: 'GET', url: '/v1/contacts' }), 403, 'forbidden');
    const up = await admin('PATCH', `/admin/accounts/${acc.accountId}`, { plan: 'growth' });
    expect(up.statusCode, up.body).toBe(200);
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).statusCode).toBe(200);
    await admin('PATCH', `/admin/accounts/${acc.accountId}`, { plan: 'starter' });
    expectError(await acc.call({ method: 'GET', url: '/v1/contacts' }), 403, 'forbidden');
  });

  it('gives Enterprise accounts access', async () => {
    const acc = await newAccount(t, { plan: 'enterprise' });
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).statusCode).toBe(200);
  });

  it('checks the key before the body: an unauthenticated malformed body is still 401', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/contacts',
      headers: { 'content-type': 'application/json' },
      payload: '{not json',
    });
    expectError(res, 401, 'unauthorized');
  });
});

describe('account isolation', () => {
  it("answers 404 to account B for A's contact on GET, PUT, DELETE and lifecycle, and leaves it untouched", async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const contact = await createContact(a, { name: 'Private' });
    const attempts = [
      b.call({ method: 'GET', url: `/v1/contacts/${contact.id}` }),
      b.call({ method: 'PUT', url: `/v1/contacts/${contact.id}`, payload: { name: 'Stolen' } }),
      b.call({
        method: 'POST',
        url: `/v1/contacts/${contact.id}/lifecycle`,
        payload: { lifecycle_stage: 'churned' },
      }),
    ];
    for (const res of await Promise.all(attempts)) expectError(res, 404, 'not_found');
    expectError(
      await b.call({ method: 'DELETE', url: `/v1/contacts/${contact.id}` }),
      404,
      'not_found',
    );
    const still = await a.call({ method: 'GET', url: `/v1/contacts/${contact.id}` });
    expect(still.statusCode).toBe(200);
    expect(still.json()).toEqual(contact);
  });

  it('concurrent reads, which share one key lookup and one contact query, each see only their own account', async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const revoked = await newAccount(t);
    expect((await admin('DELETE', `/admin/api-keys/${revoked.keyId}`)).statusCode).toBe(200);
    const aContact = await createContact(a, { name: 'A' });
    const bContact = await createContact(b, { name: 'B' });
    const calls = [];
    for (let i = 0; i < 10; i++) {
      calls.push(
        a
          .call({ method: 'GET', url: `/v1/contacts/${aContact.id}` })
          .then((res) => ['a-own', res] as const),
        b
          .call({ method: 'GET', url: `/v1/contacts/${aContact.id}` })
          .then((res) => ['b-other', res] as const),
        b
          .call({ method: 'GET', url: `/v1/contacts/${bContact.id}` })
          .then((res) => ['b-own', res] as const),
        a
          .call({ method: 'GET', url: `/v1/contacts/${bContact.id}` })
          .then((res) => ['a-other', res] as const),
        revoked
          .call({ method: 'GET', url: `/v1/contacts/${aContact.id}` })
          .then((res) => ['revoked', res] as const),
      );
    }
    for (const [kind, res] of await Promise.all(calls)) {
      if (kind === 'a-own') expect(res.json()).toEqual(aContact);
      else if (kind === 'b-own') expect(res.json()).toEqual(bContact);
      else if (kind === 'revoked') expectError(res, 401, 'unauthorized');
      else expectError(res, 404, 'not_found');
    }
  });

  it("never shows A's contacts or tags in B's list, totals, search or tag filter", async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const aContact = await createContact(a, { name: 'Alice Shared', tags: ['secret-a', 'common'] });
    const bContact = await createContact(b, { name: 'Bob Shared', tags: ['common'] });

    const bList = (await b.call({ method: 'GET', url: '/v1/contacts' })).json();
    expect(bList.total).toBe(1);
    expect(bList.data.map((c: { id: string }) => c.id)).toEqual([bContact.id]);

    const bSearch = (await b.call({ method: 'GET', url: '/v1/contacts?search=shared' })).json();
    expect(bSearch.total).toBe(1);
    expect(bSearch.data.map((c: { id: string }) => c.id)).toEqual([bContact.id]);
    const byPhone = (
      await b.call({
        method: 'GET',
        url: `/v1/contacts?search=${encodeURIComponent(aContact.phone)}`,
      })
    ).json();
    expect(byPhone.total).toBe(0);

    const bTagged = (await b.call({ method: 'GET', url: '/v1/contacts?tag=common' })).json();
    expect(bTagged.data.map((c: { id: string }) => c.id)).toEqual([bContact.id]);
    expect((await b.call({ method: 'GET', url: '/v1/contacts?tag=secret-a' })).json().total).toBe(
      0,
    );

    const bTags = (await b.call({ method: 'GET', url: '/v1/tags' })).json();
    expect(bTags.total).toBe(1);
    expect(bTags.data.map((x: { name: string }) => x.name)).toEqual(['common']);

    const aList = (await a.call({ method: 'GET', url: '/v1/contacts' })).json();
    expect(aList.data.map((c: { id: string }) => c.id)).toEqual([aContact.id]);
  });

  it("does not let B's DELETE free A's phone or B's create conflict with it", async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const contact = await createContact(a);
    await createContact(b, { phone: contact.phone });
    const dup = await a.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: contact.phone },
    });
    expectError(dup, 409, 'conflict');
  });
});

describe('bearer scheme', () => {
  it('accepts the scheme name in any case (RFC 9110)', async () => {
    const acc = await newAccount(t);
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: `bearer ${acc.apiKey}` },
    });
    expect(res.statusCode).toBe(200);
  });
});
