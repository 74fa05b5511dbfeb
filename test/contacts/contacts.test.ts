import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { signedInUser } from '../users/session-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

async function create(acc: TestAccount, payload: Record<string, unknown>) {
  return acc.call({ method: 'POST', url: '/v1/contacts', payload });
}

async function createOk(acc: TestAccount, payload: Record<string, unknown> = {}) {
  const res = await create(acc, { phone: randomPhone(), ...payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

/** Expects a 422 validation_error whose details name `field`. */
function expect422(res: LightMyRequestResponse, field: string) {
  expect(res.statusCode, res.body).toBe(422);
  const body = res.json();
  expect(body.error.code).toBe('validation_error');
  expect(typeof body.error.message).toBe('string');
  expect(body.error.details.map((d: { field: string }) => d.field)).toContain(field);
}

async function contactEvents(accountId: string) {
  return t.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('type', '=', 'contact.created')
    .orderBy('seq')
    .execute();
}

async function list(acc: TestAccount, query: string) {
  const res = await acc.call({ method: 'GET', url: `/v1/contacts${query}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{
    data: { id: string; [field: string]: unknown }[];
    total: number;
    page: number;
  }>();
}

describe('POST /v1/contacts', () => {
  it('answers 201 with every field of a contact', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const res = await create(acc, {
      phone,
      name: 'Ada Lovelace',
      email: 'ada@example.com',
      tags: ['vip'],
      custom_fields: { plan: 'gold' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const c = res.json();
    expect(Object.keys(c).sort()).toEqual(
      [
        'created_at',
        'custom_fields',
        'email',
        'id',
        'identities',
        'lifecycle_stage',
        'name',
        'phone',
        'tags',
        'updated_at',
      ].sort(),
    );
    expect(c.id).toMatch(/^con_/);
    expect(c).toMatchObject({
      phone,
      name: 'Ada Lovelace',
      email: 'ada@example.com',
      tags: ['vip'],
      lifecycle_stage: null,
      custom_fields: { plan: 'gold' },
      identities: [{ channel: 'whatsapp', id: phone }],
    });
    expect(c.created_at).toMatch(ISO);
    expect(c.updated_at).toBe(c.created_at);
  });

  it('gives null name and email and empty tags/custom_fields when they are omitted', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const c = await createOk(acc, { phone });
    expect(c).toMatchObject({
      phone,
      name: null,
      email: null,
      tags: [],
      custom_fields: {},
      lifecycle_stage: null,
    });
    const explicitNull = await createOk(acc, { name: null, email: null });
    expect(explicitNull).toMatchObject({ name: null, email: null });
  });

  it('requires phone', async () => {
    const acc = await newAccount(t);
    expect422(await create(acc, { name: 'No phone' }), 'phone');
  });

  it('trims and de-duplicates tags, keeping first-seen order', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, { tags: ['  vip ', 'beta', 'vip', 'beta  ', 'x'] });
    expect(c.tags).toEqual(['vip', 'beta', 'x']);
  });

  it('accepts 50 tags and refuses 51 with 422', async () => {
    const acc = await newAccount(t);
    const fifty = Array.from({ length: 50 }, (_, i) => `t${i}`);
    expect((await createOk(acc, { tags: fifty })).tags).toHaveLength(50);
    expect422(await create(acc, { phone: randomPhone(), tags: [...fifty, 't50'] }), 'tags');
  });

  it('refuses a tag longer than 64 characters after trimming, and an empty tag', async () => {
    const acc = await newAccount(t);
    // 64 characters plus surrounding spaces is fine once trimmed.
    const ok = await createOk(acc, { tags: [`  ${'a'.repeat(64)}  `] });
    expect(ok.tags).toEqual(['a'.repeat(64)]);
    expect422(await create(acc, { phone: randomPhone(), tags: ['ok', 'b'.repeat(65)] }), 'tags.1');
    expect422(await create(acc, { phone: randomPhone(), tags: ['   '] }), 'tags.0');
    expect422(await create(acc, { phone: randomPhone(), tags: ['c'.repeat(500)] }), 'tags.0');
    expect422(await create(acc, { phone: randomPhone(), tags: [7] }), 'tags.0');
  });

  it('enforces custom_fields key rules (1-64 chars of a-z, 0-9, _)', async () => {
    const acc = await newAccount(t);
    const ok = await createOk(acc, { custom_fields: { a_1: 'x', [`k${'z'.repeat(63)}`]: 'y' } });
    expect(Object.keys(ok.custom_fields)).toHaveLength(2);
    expect422(
      await create(acc, { phone: randomPhone(), custom_fields: { Plan: 'x' } }),
      'custom_fields.Plan',
    );
    expect422(
      await create(acc, { phone: randomPhone(), custom_fields: { 'has-dash': 'x' } }),
      'custom_fields.has-dash',
    );
    expect422(
      await create(acc, { phone: randomPhone(), custom_fields: { 'sp ace': 'x' } }),
      'custom_fields.sp ace',
    );
    const long = 'k'.repeat(65);
    expect422(
      await create(acc, { phone: randomPhone(), custom_fields: { [long]: 'x' } }),
      `custom_fields.${long}`,
    );
    const empty = await create(acc, { phone: randomPhone(), custom_fields: { '': 'x' } });
    expect(empty.statusCode, empty.body).toBe(422);
    expect(empty.json().error.code).toBe('validation_error');
  });

  it('keeps custom_fields values as string, number or boolean and refuses other types', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, { custom_fields: { s: 'text', n: 42.5, i: 7, b: false } });
    expect(c.custom_fields).toEqual({ s: 'text', n: 42.5, i: 7, b: false });
    const got = await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` });
    expect(got.json().custom_fields).toEqual({ s: 'text', n: 42.5, i: 7, b: false });
    for (const bad of [{ o: { nested: 1 } }, { a: [1, 2] }, { z: null }]) {
      const res = await create(acc, { phone: randomPhone(), custom_fields: bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(422);
      expect(res.json().error.code).toBe('validation_error');
      expect(res.json().error.details[0].field).toMatch(/^custom_fields/);
    }
    expect422(await create(acc, { phone: randomPhone(), custom_fields: 'nope' }), 'custom_fields');
  });

  it('refuses lifecycle_stage in the body as an unknown field', async () => {
    const acc = await newAccount(t);
    const res = await create(acc, { phone: randomPhone(), lifecycle_stage: 'lead' });
    expect422(res, 'lifecycle_stage');
    expect(res.json().error.message).toContain('lifecycle_stage');
    expect((await list(acc, '')).total).toBe(0);
  });

  it('refuses an email that is not an email address', async () => {
    const acc = await newAccount(t);
    for (const email of ['not-an-email', 'a@', '@b.com', 'a b@c.com', '']) {
      const res = await create(acc, { phone: randomPhone(), email });
      expect(res.statusCode, email).toBe(422);
      expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain('email');
    }
    expect422(await create(acc, { phone: randomPhone(), email: 12 }), 'email');
  });

  it.each([
    ['no plus sign', '14155550123'],
    ['spaces', '+1 415 555 0123'],
    ['dashes', '+1-415-555-0123'],
    ['leading 0 after +', '+04155550123'],
    ['too short (7 digits)', '+1415555'],
    ['too long (16 digits)', '+1415555012345678'],
    ['letters', '+1415555ABCD'],
    ['impossible length for its country (US, 9 national digits)', '+1415555012'],
    ['impossible length for its country (GB, 5 national digits)', '+4420123'],
    ['empty', ''],
    ['very long', `+${'1'.repeat(40)}`],
  ])('refuses a malformed phone (%s) with 422 naming phone', async (_label, phone) => {
    const acc = await newAccount(t);
    expect422(await create(acc, { phone }), 'phone');
  });

  it('refuses a phone that is not a string', async () => {
    const acc = await newAccount(t);
    expect422(await create(acc, { phone: 14155550123 }), 'phone');
  });

  it('accepts valid E.164 numbers of several countries and stores them exactly', async () => {
    const acc = await newAccount(t);
    for (const phone of ['+447911123456', '+4915123456789', '+33612345678']) {
      const c = await createOk(acc, { phone });
      expect(c.phone).toBe(phone);
    }
  });
});

describe('duplicate phone', () => {
  it('answers 409 conflict on create with a phone the account already has', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    await createOk(acc, { phone });
    const dup = await create(acc, { phone, name: 'Other' });
    expect(dup.statusCode, dup.body).toBe(409);
    expect(dup.json().error.code).toBe('conflict');
    expect((await list(acc, '')).total).toBe(1);
  });

  it('answers 409 conflict on PUT to the phone of another contact, leaving both unchanged', async () => {
    const acc = await newAccount(t);
    const a = await createOk(acc);
    const b = await createOk(acc);
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${b.id}`,
      payload: { phone: a.phone, name: 'X' },
    });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error.code).toBe('conflict');
    const bNow = await acc.call({ method: 'GET', url: `/v1/contacts/${b.id}` });
    expect(bNow.json()).toEqual(b);
  });

  it('lets a contact PUT its own phone again', async () => {
    const acc = await newAccount(t);
    const a = await createOk(acc);
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${a.id}`,
      payload: { phone: a.phone },
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('is race-safe: 10 concurrent creates of one phone give exactly one 201 and nine 409', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => create(acc, { phone, name: `racer ${i}` })),
    );
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409, 409, 409]);
    for (const r of results.filter((x) => x.statusCode === 409))
      expect(r.json().error.code).toBe('conflict');
    expect((await list(acc, '')).total).toBe(1);
    expect(await contactEvents(acc.accountId)).toHaveLength(1);
  });

  it('concurrent creates share transactions, each contact with its event and tags', async () => {
    const acc = await newAccount(t);
    const payloads = Array.from({ length: 20 }, (_, i) => ({
      phone: randomPhone(),
      name: `burst ${i}`,
      tags: [`t${i % 3}`],
    }));
    const results = await Promise.all(payloads.map((p) => create(acc, p)));
    expect(results.map((r) => r.statusCode)).toEqual(payloads.map(() => 201));
    const events = await contactEvents(acc.accountId);
    expect(events.map((e) => e.data)).toEqual(
      expect.arrayContaining(results.map((r) => ({ ...r.json(), actor: null }))),
    );
    expect(events).toHaveLength(20);
    // Written by fewer transactions than requests: group commit.
    const xids = await t.db
      .selectFrom('events')
      .select(sql<string>`xid::text`.as('xid'))
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(new Set(xids.map((r) => r.xid)).size).toBeLessThan(20);
    const tags = await acc.call({ method: 'GET', url: '/v1/tags' });
    expect(tags.json().data.map((tag: { name: string }) => tag.name)).toEqual(['t0', 't1', 't2']);
  });

  it('a taken phone among concurrent creates fails only its own request', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const taken = (await createOk(acc)).phone;
    const payloads = Array.from({ length: 12 }, (_, i) => ({
      phone: i === 7 ? taken : randomPhone(),
      name: `burst ${i}`,
    }));
    const results = await Promise.all([
      ...payloads.map((p) => create(acc, p)),
      create(other, { phone: taken, name: 'elsewhere' }),
    ]);
    expect(results.map((r) => r.statusCode)).toEqual([
      ...payloads.map((_, i) => (i === 7 ? 409 : 201)),
      201,
    ]);
    expect(results[7]!.json().error.code).toBe('conflict');
    expect((await list(acc, '')).total).toBe(12);
    expect(await contactEvents(acc.accountId)).toHaveLength(12);
    expect(await contactEvents(other.accountId)).toHaveLength(1);
  });

  it('frees the phone when its contact is deleted', async () => {
    const acc = await newAccount(t);
    const old = await createOk(acc);
    const del = await acc.call({ method: 'DELETE', url: `/v1/contacts/${old.id}` });
    expect(del.statusCode).toBe(200);
    const again = await createOk(acc, { phone: old.phone });
    expect(again.id).not.toBe(old.id);
    expect(again.phone).toBe(old.phone);
  });

  it('is per account: two accounts may hold the same phone', async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const phone = randomPhone();
    await createOk(a, { phone });
    await createOk(b, { phone });
  });
});

describe('unknown contact id', () => {
  it.each(['con_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'not-an-id', '%20'])(
    'GET/PUT/DELETE/lifecycle of %s answer 404 not_found',
    async (id) => {
      const acc = await newAccount(t);
      const calls = [
        acc.call({ method: 'GET', url: `/v1/contacts/${id}` }),
        acc.call({ method: 'PUT', url: `/v1/contacts/${id}`, payload: { name: 'x' } }),
        acc.call({ method: 'DELETE', url: `/v1/contacts/${id}` }),
        acc.call({
          method: 'POST',
          url: `/v1/contacts/${id}/lifecycle`,
          payload: { lifecycle_stage: 'lead' },
        }),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.statusCode, res.body).toBe(404);
        expect(res.json().error.code).toBe('not_found');
      }
    },
  );
});

describe('unknown query parameters', () => {
  it('are a 422 naming the parameter on every contacts route, not silently ignored', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    const calls = [
      acc.call({
        method: 'POST',
        url: '/v1/contacts?dry_run=1',
        payload: { phone: randomPhone() },
      }),
      acc.call({ method: 'GET', url: `/v1/contacts/${c.id}?dry_run=1` }),
      acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}?dry_run=1`, payload: { name: 'x' } }),
      acc.call({ method: 'DELETE', url: `/v1/contacts/${c.id}?dry_run=1` }),
      acc.call({
        method: 'POST',
        url: `/v1/contacts/${c.id}/lifecycle?dry_run=1`,
        payload: { lifecycle_stage: 'lead' },
      }),
    ];
    for (const res of await Promise.all(calls)) expect422(res, 'dry_run');
    expect((await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` })).json()).toEqual(c);
    expect((await list(acc, '')).total).toBe(1);
  });
});

describe('PUT /v1/contacts/{id}', () => {
  it('replaces tags, merges custom_fields, removes a key set to null and keeps omitted fields', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, {
      name: 'Grace',
      email: 'grace@example.com',
      tags: ['a', 'b'],
      custom_fields: { keep: 'k', change: 1, drop: true },
    });
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${c.id}`,
      payload: { tags: [' c ', 'c'], custom_fields: { change: 2, drop: null, added: 'new' } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const u = res.json();
    expect(u).toMatchObject({
      id: c.id,
      phone: c.phone,
      name: 'Grace',
      email: 'grace@example.com',
      tags: ['c'],
      custom_fields: { keep: 'k', change: 2, added: 'new' },
      lifecycle_stage: null,
    });
    expect(u.custom_fields).not.toHaveProperty('drop');
    const got = await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` });
    expect(got.json()).toEqual(u);
  });

  it('keeps every field with an empty body, and keeps custom_fields when only other fields change', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, { name: 'N', tags: ['x'], custom_fields: { a: 1 } });
    const empty = await acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}`, payload: {} });
    expect(empty.statusCode, empty.body).toBe(200);
    expect({ ...empty.json(), updated_at: c.updated_at }).toEqual(c);
    const named = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${c.id}`,
      payload: { name: 'M' },
    });
    expect(named.json()).toMatchObject({ name: 'M', tags: ['x'], custom_fields: { a: 1 } });
  });

  it('clears name and email with null', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, { name: 'N', email: 'n@example.com' });
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${c.id}`,
      payload: { name: null, email: null },
    });
    expect(res.json()).toMatchObject({ name: null, email: null });
  });

  it('moves updated_at forward and never created_at', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    t.clock.advance(1500);
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${c.id}`,
      payload: { name: 'Later' },
    });
    const u = res.json();
    expect(u.created_at).toBe(c.created_at);
    expect(Date.parse(u.updated_at)).toBeGreaterThan(Date.parse(c.updated_at));
  });

  it('changes the phone, and the old phone is then free', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    const newPhone = randomPhone();
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${c.id}`,
      payload: { phone: newPhone },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().phone).toBe(newPhone);
    await createOk(acc, { phone: c.phone });
  });

  it('validates like create: malformed phone, email, tags, field keys, lifecycle_stage and unknown fields are 422', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    const put = (payload: Record<string, unknown>) =>
      acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}`, payload });
    expect422(await put({ phone: '+1 415 555 0123' }), 'phone');
    expect422(await put({ phone: '+1415555012' }), 'phone');
    expect422(await put({ email: 'nope' }), 'email');
    expect422(await put({ tags: ['d'.repeat(65)] }), 'tags.0');
    expect422(await put({ tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }), 'tags');
    expect422(await put({ custom_fields: { BAD: 1 } }), 'custom_fields.BAD');
    expect422(await put({ custom_fields: { o: { n: 1 } } }), 'custom_fields.o');
    expect422(await put({ lifecycle_stage: 'customer' }), 'lifecycle_stage');
    expect422(await put({ nmae: 'typo' }), 'nmae');
    const unchanged = await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` });
    expect(unchanged.json()).toEqual(c);
  });
});

describe('DELETE /v1/contacts/{id}', () => {
  it('is permanent: answers {success:true}, then the contact is 404 and gone from the list', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    const del = await acc.call({ method: 'DELETE', url: `/v1/contacts/${c.id}` });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ success: true });
    expect((await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` })).statusCode).toBe(404);
    expect((await acc.call({ method: 'DELETE', url: `/v1/contacts/${c.id}` })).statusCode).toBe(
      404,
    );
    expect(
      (await acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}`, payload: { name: 'x' } }))
        .statusCode,
    ).toBe(404);
    expect((await list(acc, '')).total).toBe(0);
  });
});

describe('POST /v1/contacts/{id}/lifecycle', () => {
  it('sets lead, customer, churned and back to null; the contact starts at null', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    expect(c.lifecycle_stage).toBeNull();
    for (const stage of ['lead', 'customer', 'churned', null]) {
      const res = await acc.call({
        method: 'POST',
        url: `/v1/contacts/${c.id}/lifecycle`,
        payload: { lifecycle_stage: stage },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ id: c.id, lifecycle_stage: stage, phone: c.phone });
      const got = await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` });
      expect(got.json().lifecycle_stage).toBe(stage);
    }
  });

  it('refuses an unknown stage, a missing stage and extra fields with 422', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    const post = (payload: unknown) =>
      acc.call({
        method: 'POST',
        url: `/v1/contacts/${c.id}/lifecycle`,
        payload: payload as object,
      });
    expect422(await post({ lifecycle_stage: 'prospect' }), 'lifecycle_stage');
    expect422(await post({ lifecycle_stage: 'Customer' }), 'lifecycle_stage');
    expect422(await post({}), 'lifecycle_stage');
    expect422(await post({ lifecycle_stage: 'lead', extra: 1 }), 'extra');
    expect(
      (await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` })).json().lifecycle_stage,
    ).toBeNull();
  });
});

describe('GET /v1/tags', () => {
  it("lists each of the account's tags once, from create and PUT, as a collection", async () => {
    const acc = await newAccount(t);
    const a = await createOk(acc, { tags: ['vip', 'beta'] });
    await createOk(acc, { tags: [' vip ', 'gamma'] });
    await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${a.id}`,
      payload: { tags: ['delta', 'vip'] },
    });
    const res = await acc.call({ method: 'GET', url: '/v1/tags' });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.total).toBe(4);
    expect(body.page).toBe(1);
    expect(body.data.map((x: { name: string }) => x.name).sort()).toEqual([
      'beta',
      'delta',
      'gamma',
      'vip',
    ]);
    for (const tag of body.data) expect(tag.created_at).toMatch(ISO);
  });

  it('paginates: every tag exactly once across pages, total right', async () => {
    const acc = await newAccount(t);
    const names = Array.from({ length: 7 }, (_, i) => `tag${i}`);
    await createOk(acc, { tags: names.slice(0, 4) });
    await createOk(acc, { tags: names.slice(2) });
    const seen: string[] = [];
    for (let page = 1; page <= 4; page++) {
      const res = await acc.call({ method: 'GET', url: `/v1/tags?limit=3&page=${page}` });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.total).toBe(7);
      expect(body.page).toBe(page);
      expect(body.data.length).toBe(page <= 2 ? 3 : page === 3 ? 1 : 0);
      seen.push(...body.data.map((x: { name: string }) => x.name));
    }
    expect(seen.sort()).toEqual(names);
  });

  it('validates its pagination query', async () => {
    const acc = await newAccount(t);
    for (const q of ['limit=101', 'page=0', 'limit=0', 'page=x', 'foo=1']) {
      const res = await acc.call({ method: 'GET', url: `/v1/tags?${q}` });
      expect(res.statusCode, q).toBe(422);
    }
  });
});

describe('GET /v1/contacts', () => {
  it('lists newest first as { data, total, page }', async () => {
    const acc = await newAccount(t);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await createOk(acc, { name: `c${i}` })).id);
    const body = await list(acc, '');
    expect(Object.keys(body).sort()).toEqual(['data', 'page', 'total']);
    expect(body.total).toBe(5);
    expect(body.page).toBe(1);
    expect(body.data.map((c) => c.id)).toEqual([...ids].reverse());
    expect(Object.keys(body.data[0]!).sort()).toEqual(
      [
        'created_at',
        'custom_fields',
        'email',
        'id',
        'identities',
        'lifecycle_stage',
        'name',
        'phone',
        'tags',
        'updated_at',
      ].sort(),
    );
  });

  it('filters by tag', async () => {
    const acc = await newAccount(t);
    const vip1 = await createOk(acc, { tags: ['vip', 'x'] });
    await createOk(acc, { tags: ['other'] });
    await createOk(acc);
    const vip2 = await createOk(acc, { tags: ['vip'] });
    const body = await list(acc, '?tag=vip');
    expect(body.total).toBe(2);
    expect(body.data.map((c) => c.id)).toEqual([vip2.id, vip1.id]);
    expect((await list(acc, '?tag=VIP')).total).toBe(0);
    expect((await list(acc, '?tag=nope')).total).toBe(0);
    // Stored tags are trimmed, and so is the filter.
    expect((await list(acc, '?tag=%20vip%20')).total).toBe(2);
  });

  it('searches name case-insensitively and phone partially', async () => {
    const acc = await newAccount(t);
    const ada = await createOk(acc, { name: 'Ada Lovelace', phone: '+14155550142' });
    const grace = await createOk(acc, { name: 'Grace Hopper', phone: '+14155559977' });
    expect((await list(acc, '?search=lovelace')).data.map((c) => c.id)).toEqual([ada.id]);
    expect((await list(acc, '?search=GRACE')).data.map((c) => c.id)).toEqual([grace.id]);
    expect((await list(acc, '?search=ace')).total).toBe(2); // "Lovelace", "Grace"
    expect((await list(acc, '?search=9977')).data.map((c) => c.id)).toEqual([grace.id]);
    expect((await list(acc, `?search=${encodeURIComponent('+1415555')}`)).total).toBe(2);
    expect((await list(acc, '?search=zzz')).total).toBe(0);
  });

  it('takes % and _ in search literally', async () => {
    const acc = await newAccount(t);
    const pct = await createOk(acc, { name: '100% real' });
    const under = await createOk(acc, { name: 'snake_case' });
    await createOk(acc, { name: 'snakeXcase' });
    await createOk(acc, { name: 'plain' });
    const byPct = await list(acc, `?search=${encodeURIComponent('%')}`);
    expect(byPct.data.map((c) => c.id)).toEqual([pct.id]);
    const byUnderscore = await list(acc, `?search=${encodeURIComponent('e_c')}`);
    expect(byUnderscore.data.map((c) => c.id)).toEqual([under.id]);
    expect((await list(acc, `?search=${encodeURIComponent('\\')}`)).total).toBe(0);
  });

  it('combines tag and search filters and pages their result', async () => {
    const acc = await newAccount(t);
    await createOk(acc, { name: 'Team A', tags: ['t'] });
    const b = await createOk(acc, { name: 'Team B', tags: ['t'] });
    await createOk(acc, { name: 'Team C' });
    const body = await list(acc, '?tag=t&search=team&limit=1');
    expect(body.total).toBe(2);
    expect(body.data.map((c) => c.id)).toEqual([b.id]);
  });

  it('pages 20 by default and accepts limit 100', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 21; i++) await createOk(acc);
    const first = await list(acc, '');
    expect(first.data).toHaveLength(20);
    expect(first.total).toBe(21);
    const second = await list(acc, '?page=2');
    expect(second.data).toHaveLength(1);
    expect(second.page).toBe(2);
    const all = await list(acc, '?limit=100');
    expect(all.data).toHaveLength(21);
    const beyond = await list(acc, '?page=9');
    expect(beyond).toEqual({ data: [], total: 21, page: 9 });
  });

  it.each([
    ['limit over 100', 'limit=101', 'limit'],
    ['page 0', 'page=0', 'page'],
    ['limit 0', 'limit=0', 'limit'],
    ['negative page', 'page=-1', 'page'],
    ['non-integer page', 'page=1.5', 'page'],
    ['non-numeric limit', 'limit=ten', 'limit'],
    ['unknown query parameter', 'serach=x', 'serach'],
  ])('refuses %s with 422 naming the parameter', async (_label, query, field) => {
    const acc = await newAccount(t);
    expect422(await acc.call({ method: 'GET', url: `/v1/contacts?${query}` }), field);
  });

  it('returns each of 45 contacts exactly once when walking all pages of 7', async () => {
    const acc = await newAccount(t);
    const ids = new Set<string>();
    for (let i = 0; i < 45; i++) ids.add((await createOk(acc)).id);
    const seen: string[] = [];
    for (let page = 1; page <= 7; page++) {
      const body = await list(acc, `?limit=7&page=${page}`);
      expect(body.total).toBe(45);
      expect(body.page).toBe(page);
      expect(body.data).toHaveLength(page < 7 ? 7 : 3);
      seen.push(...body.data.map((c) => c.id));
    }
    expect(seen).toHaveLength(45);
    expect(new Set(seen)).toEqual(ids);
    expect((await list(acc, '?limit=7&page=8')).data).toHaveLength(0);
  });

  it('breaks created_at ties by id, newest first, so pages never overlap or skip', async () => {
    const acc = await newAccount(t);
    const ids: string[] = [];
    for (let i = 0; i < 9; i++) ids.push((await createOk(acc)).id);
    // The same instant for all of them: only the id can order them.
    await t.db
      .updateTable('contacts')
      .set({ created_at: new Date('2024-01-01T00:00:00Z') })
      .where('account_id', '=', acc.accountId)
      .execute();
    const seen: string[] = [];
    for (let page = 1; page <= 3; page++) {
      seen.push(...(await list(acc, `?limit=4&page=${page}`)).data.map((c) => c.id));
    }
    expect(seen).toEqual([...ids].reverse());
  });
});

describe('contact.created event', () => {
  it('is written with data equal to the contact the API returned', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, {
      name: 'Evt',
      email: 'e@example.com',
      tags: ['a'],
      custom_fields: { n: 1, b: true },
    });
    const events = await contactEvents(acc.accountId);
    expect(events).toHaveLength(1);
    expect(events[0]!.id).toMatch(/^evt_/);
    expect(events[0]!.data).toEqual({ ...c, actor: null });
  });

  it('is written in the same transaction as the contact', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    // Rows written by one transaction carry the same xmin (its transaction id).
    const xmin = async (table: 'contacts' | 'events', column: 'id' | 'type', value: string) => {
      const { rows } = await sql<{ x: string }>`
        SELECT xmin::text AS x FROM ${sql.table(table)}
        WHERE account_id = ${acc.accountId} AND ${sql.ref(column)} = ${value}`.execute(t.db);
      expect(rows).toHaveLength(1);
      return rows[0]!.x;
    };
    expect(await xmin('events', 'type', 'contact.created')).toBe(
      await xmin('contacts', 'id', c.id),
    );
  });

  it('is not written when the create fails (duplicate phone, validation error)', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    expect((await create(acc, { phone: c.phone })).statusCode).toBe(409);
    expect((await create(acc, { phone: randomPhone(), email: 'bad' })).statusCode).toBe(422);
    expect((await create(acc, { phone: 'bad' })).statusCode).toBe(422);
    const events = await contactEvents(acc.accountId);
    expect(events).toHaveLength(1);
    expect((events[0]!.data as { id: string }).id).toBe(c.id);
  });

  it('is not written by updates, lifecycle changes or deletes (they have their own, or none)', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    await acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}`, payload: { name: 'x' } });
    await acc.call({
      method: 'POST',
      url: `/v1/contacts/${c.id}/lifecycle`,
      payload: { lifecycle_stage: 'lead' },
    });
    await acc.call({ method: 'DELETE', url: `/v1/contacts/${c.id}` });
    expect(await contactEvents(acc.accountId)).toHaveLength(1);
  });
});

describe('contact.updated', () => {
  async function updatedEvents(accountId: string) {
    const { rows } = await sql<{ data: unknown; xmin: string }>`
      SELECT data, xmin::text AS xmin FROM events
      WHERE account_id = ${accountId} AND type = 'contact.updated' ORDER BY seq`.execute(t.db);
    return rows;
  }
  const put = (acc: TestAccount, id: string, payload: Record<string, unknown>) =>
    acc.call({ method: 'PUT', url: `/v1/contacts/${id}`, payload });
  const stage = (acc: TestAccount, id: string, lifecycle_stage: string | null) =>
    acc.call({ method: 'POST', url: `/v1/contacts/${id}/lifecycle`, payload: { lifecycle_stage } });

  it('PUT and lifecycle write it with the contact as GET answers it then, actor null for an API key, in the transaction of the change', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc, { tags: ['a'] });
    const edited = await put(acc, c.id, { name: 'Ada', tags: ['b'], custom_fields: { x: 1 } });
    expect(edited.statusCode, edited.body).toBe(200);
    const got = await acc.call({ method: 'GET', url: `/v1/contacts/${c.id}` });
    expect(got.json()).toEqual(edited.json());
    const staged = await stage(acc, c.id, 'customer');
    expect(staged.statusCode, staged.body).toBe(200);

    const events = await updatedEvents(acc.accountId);
    expect(events.map((e) => e.data)).toEqual([
      { ...got.json(), actor: null },
      { ...staged.json(), actor: null },
    ]);
    const { rows } = await sql<{ x: string }>`
      SELECT xmin::text AS x FROM contacts
      WHERE account_id = ${acc.accountId} AND id = ${c.id}`.execute(t.db);
    expect(events[1]!.xmin).toBe(rows[0]!.x);
  });

  it('is not written when nothing changed, nor for a change refused; a PUT that changes nothing keeps updated_at', async () => {
    const acc = await newAccount(t);
    const other = await createOk(acc);
    const c = await createOk(acc, { name: 'Ada', tags: ['a', 'b'], custom_fields: { x: 1 } });
    t.clock.advance(1000);
    for (const payload of [
      {},
      { name: 'Ada' },
      { phone: c.phone, tags: [' a', 'b ', 'a'] },
      { custom_fields: { x: 1, gone: null } },
    ]) {
      const res = await put(acc, c.id, payload);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual(c);
    }
    expect((await stage(acc, c.id, null)).json()).toEqual(c);
    expect((await put(acc, c.id, { phone: other.phone })).statusCode).toBe(409);
    expect((await put(acc, 'con_missing', { name: 'x' })).statusCode).toBe(404);
    expect((await stage(acc, 'con_missing', 'lead')).statusCode).toBe(404);
    expect(await updatedEvents(acc.accountId)).toEqual([]);

    // Tags reordered are a change (the order is kept).
    const reordered = await put(acc, c.id, { tags: ['b', 'a'] });
    expect(reordered.json().updated_at).not.toBe(c.updated_at);
    expect(await updatedEvents(acc.accountId)).toHaveLength(1);
  });

  it('through a session, the data carries the user as actor', async () => {
    const acc = await newAccount(t);
    const c = await createOk(acc);
    const user = await signedInUser(t, acc, { name: 'Sam' });
    const res = await user.call({
      method: 'PUT',
      url: `/v1/contacts/${c.id}`,
      payload: { email: 'sam@example.com' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect((await updatedEvents(acc.accountId)).map((e) => e.data)).toEqual([
      { ...res.json(), actor: { type: 'user', id: user.userId, name: 'Sam' } },
    ]);
  });

  it("is delivered to the account's webhooks subscribed to it", async () => {
    const acc = await newAccount(t);
    const hook = await acc.call({
      method: 'POST',
      url: '/v1/webhooks',
      payload: { url: 'https://127.0.0.1:9/hook', events: ['contact.updated'] },
    });
    expect(hook.statusCode, hook.body).toBe(201);
    const c = await createOk(acc);
    expect((await stage(acc, c.id, 'lead')).statusCode).toBe(200);
    const deliveries = await t.db
      .selectFrom('webhook_deliveries')
      .select(['webhook_id', 'event_type'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(deliveries).toEqual([{ webhook_id: hook.json().id, event_type: 'contact.updated' }]);
  });
});
