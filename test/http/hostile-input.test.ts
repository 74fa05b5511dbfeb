import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EARLIEST_DATE_TIME,
  isExistingDateTime,
  LATEST_DATE_TIME,
} from '../../src/http/validation.js';
import { jsonDepth, MAX_JSON_DEPTH } from '../../src/http/input-guard.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { receive } from '../inbox-helpers.js';
import { connectWebchat, ORIGIN, SECRETS_KEY } from '../webchat/webchat-helpers.js';

let t: TestApp;
let acc: TestAccount;
beforeAll(async () => {
  // A secrets key lets a webchat widget be connected, for its visitors' date-time query.
  t = await startTestApp({ config: { secretsKey: SECRETS_KEY } });
  acc = await newAccount(t);
});
afterAll(() => t.close());

function expect422(res: LightMyRequestResponse, field: string) {
  expect(res.statusCode, res.body).toBe(422);
  const error = res.json().error;
  expect(error.code).toBe('validation_error');
  expect(error.details.map((d: { field: string }) => d.field)).toContain(field);
  return error;
}

/** Rows the account holds in every table a POST can write. */
async function rowCounts(accountId: string): Promise<Record<string, number>> {
  const tables = [
    'contacts',
    'conversations',
    'messages',
    'notes',
    'templates',
    'users',
    'teams',
    'webhooks',
    'broadcasts',
    'events',
    'jobs',
    'idempotency_keys',
  ] as const;
  const out: Record<string, number> = {};
  for (const table of tables) {
    const row = await t.db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    out[table] = Number(row.n);
  }
  return out;
}

async function contact(): Promise<string> {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/contacts',
    payload: { phone: randomPhone() },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id as string;
}

describe('NUL characters and lone surrogates', () => {
  it('are a 422 naming the field in a body, and nothing is written, with or without an Idempotency-Key', async () => {
    const before = await rowCounts(acc.accountId);
    for (const headers of [{}, { 'idempotency-key': 'nul-1' }]) {
      expect422(
        await acc.call({
          method: 'POST',
          url: '/v1/contacts',
          headers,
          payload: { phone: randomPhone(), name: 'Ann\u0000' },
        }),
        'name',
      );
      expect422(
        await acc.call({
          method: 'POST',
          url: '/v1/contacts',
          headers,
          payload: { phone: randomPhone(), tags: ['ok', 'v\u0000ip'] },
        }),
        'tags.1',
      );
      expect422(
        await acc.call({
          method: 'POST',
          url: '/v1/contacts',
          headers,
          payload: { phone: randomPhone(), custom_fields: { plan: '\ud800' } },
        }),
        'custom_fields.plan',
      );
      expect422(
        await acc.call({
          method: 'POST',
          url: '/v1/broadcasts',
          headers,
          payload: {
            name: 'b',
            channel: 'whatsapp',
            audience: { tags: ['vip\u0000'] },
            message: { type: 'text', content: 'hi' },
          },
        }),
        'audience.tags.0',
      );
    }
    expect(await rowCounts(acc.accountId)).toEqual(before);
  });

  it('are a 422 in a field name, naming it readably', async () => {
    const error = expect422(
      await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: randomPhone(), custom_fields: { 'a\u0000b': 1 } },
      }),
      'custom_fields.a\\u0000b',
    );
    expect(error.message).not.toContain('\u0000');
  });

  it('are a 422 in a query string', async () => {
    expect422(await acc.call({ method: 'GET', url: '/v1/contacts?search=%00' }), 'search');
    expect422(await acc.call({ method: 'GET', url: '/v1/contacts?tag=vip%00' }), 'tag');
    expect422(await acc.call({ method: 'GET', url: '/v1/conversations?status=%00' }), 'status');
  });

  it('are a 404 in a path id', async () => {
    for (const url of [
      '/v1/contacts/%00',
      '/v1/contacts/con_%00x',
      '/v1/conversations/%00/messages',
      '/v1/broadcasts/%00',
      '/v1/webhooks/%00',
    ]) {
      const res = await acc.call({ method: 'GET', url });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts/%00/lifecycle',
      payload: { lifecycle_stage: 'lead' },
    });
    expect(res.statusCode).toBe(404);
  });
});

describe('URLs the router refuses', () => {
  it('answer in the envelope: bad percent-encoding is a 400, an overlong id a 404', async () => {
    for (const url of ['/v1/contacts/%FF', '/v1/templates/%', '/v1/webhooks/%ED%A0%80']) {
      const res = await acc.call({ method: 'GET', url });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
      expect(res.json()).toEqual({
        error: { code: 'invalid_request', message: expect.any(String) },
      });
    }
    const long = await acc.call({ method: 'GET', url: `/v1/users/${'x'.repeat(3_000)}` });
    expect(long.statusCode, long.body).toBe(404);
    expect(long.json()).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });
});

describe('numbers', () => {
  it('must be finite: 1e999 and -1e400 are a 422 naming the field', async () => {
    const before = await rowCounts(acc.accountId);
    const raw = (value: string) =>
      acc.call({
        method: 'POST',
        url: '/v1/contacts',
        headers: { 'content-type': 'application/json', 'idempotency-key': `inf-${value}` },
        payload: `{"phone":"${randomPhone()}","custom_fields":{"score":${value}}}`,
      });
    expect422(await raw('1e999'), 'custom_fields.score');
    expect422(await raw('-1e400'), 'custom_fields.score');
    const id = await contact();
    expect422(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${id}`,
        headers: { 'content-type': 'application/json' },
        payload: '{"custom_fields":{"score":1e999}}',
      }),
      'custom_fields.score',
    );
    const after = await rowCounts(acc.accountId);
    expect(after.contacts).toBe(before.contacts! + 1);
  });

  it('page is an integer from 1 to 10,000,000: beyond is a 422, a page past the end is empty', async () => {
    for (const page of ['1e20', 'Infinity', '-1', '0', '10000001', '1.5', 'NaN']) {
      expect422(await acc.call({ method: 'GET', url: `/v1/contacts?page=${page}` }), 'page');
    }
    const last = await acc.call({ method: 'GET', url: '/v1/contacts?page=10000000&limit=100' });
    expect(last.statusCode, last.body).toBe(200);
    expect(last.json().data).toEqual([]);
    for (const url of ['/v1/conversations', '/v1/broadcasts', '/v1/users', '/v1/templates']) {
      const res = await acc.call({ method: 'GET', url: `${url}?page=10000000&limit=100` });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
    }
  });
});

describe('integers in a query string', () => {
  it('are decimal digits: 0x10, 1e1, " 1", "+1", 0b1, 1.0 are a 422 naming the parameter', async () => {
    for (const page of ['0x10', '0X10', '1e1', '%201', '%2B1', '0b1', '0o7', '1.0', '1%20']) {
      const error = expect422(
        await acc.call({ method: 'GET', url: `/v1/contacts?page=${page}` }),
        'page',
      );
      expect(error.details).toEqual([
        { field: 'page', issue: 'must be an integer written in decimal digits' },
      ]);
    }
    expect422(await acc.call({ method: 'GET', url: '/v1/broadcasts?limit=0x10' }), 'limit');
    expect422(await acc.call({ method: 'GET', url: '/v1/users?page=1&page=0x2' }), 'page');
    for (const url of ['/v1/contacts?page=16', '/v1/contacts?page=016&limit=010']) {
      const res = await acc.call({ method: 'GET', url });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().page).toBe(16);
    }
  });
});

describe('__proto__ keys', () => {
  it('are an unknown field (422 naming it), not invalid JSON, and nothing is written', async () => {
    const before = await rowCounts(acc.accountId);
    const post = (payload: string) =>
      acc.call({
        method: 'POST',
        url: '/v1/contacts',
        headers: { 'content-type': 'application/json' },
        payload,
      });
    const root = expect422(
      await post(`{"phone":"${randomPhone()}","__proto__":{"x":1}}`),
      '__proto__',
    );
    expect(root.details).toEqual([{ field: '__proto__', issue: 'unknown field' }]);
    expect422(await post('{"__proto__":{"polluted":1}}'), '__proto__');
    expect422(
      await post(`{"phone":"${randomPhone()}","custom_fields":{"__proto__":{"admin":true}}}`),
      'custom_fields.__proto__',
    );
    expect422(
      await post(`{"phone":"${randomPhone()}","tags":[{"__proto__":null}]}`),
      'tags.0.__proto__',
    );
    // Invalid JSON is still a 400, whatever keys it has.
    const broken = await post('{"__proto__":{"x":1}');
    expect(broken.statusCode, broken.body).toBe(400);
    expect(broken.json().error.code).toBe('invalid_request');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(await rowCounts(acc.accountId)).toEqual(before);
  });
});

describe('tags', () => {
  it('in a broadcast audience are checked as a contact takes them: trimmed, then 1 to 64 characters', async () => {
    const own = await newAccount(t);
    const padded = ` ${'a'.repeat(64)}`;
    const tagged = await own.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), tags: [padded] },
    });
    expect(tagged.statusCode, tagged.body).toBe(201);
    expect(tagged.json().tags).toEqual(['a'.repeat(64)]);
    const broadcast = (tags: string[]) =>
      own.call({
        method: 'POST',
        url: '/v1/broadcasts',
        payload: {
          name: 'tagged',
          channel: 'whatsapp',
          audience: { tags },
          message: { type: 'text', content: 'hi' },
          scheduled_at: new Date(t.clock.now().getTime() + 3_600_000).toISOString(),
        },
      });
    const ok = await broadcast([padded, `${'a'.repeat(64)}\t`]);
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().audience.tags).toEqual(['a'.repeat(64)]);
    // The same refusals on both: over 64 once trimmed, blank once trimmed, over 200 as sent.
    for (const [tag, issue] of [
      [`${'b'.repeat(65)} `, 'must be 1 to 64 characters after trimming'],
      ['   ', 'must be 1 to 64 characters after trimming'],
      [` ${'c'.repeat(64)}${' '.repeat(140)}`, 'must NOT have more than 200 characters'],
    ] as const) {
      const onContact = expect422(
        await own.call({
          method: 'POST',
          url: '/v1/contacts',
          payload: { phone: randomPhone(), tags: [tag] },
        }),
        'tags.0',
      );
      expect(onContact.details).toEqual([{ field: 'tags.0', issue }]);
      const onAudience = expect422(await broadcast([tag]), 'audience.tags.0');
      expect(onAudience.details).toEqual([{ field: 'audience.tags.0', issue }]);
    }
  });
});

describe('nesting', () => {
  const deep = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

  it(`bodies nested deeper than ${MAX_JSON_DEPTH} levels are a 422, with or without an Idempotency-Key`, async () => {
    const before = await rowCounts(acc.accountId);
    for (const headers of [
      { 'content-type': 'application/json' },
      { 'content-type': 'application/json', 'idempotency-key': 'deep-1' },
    ]) {
      for (const levels of [MAX_JSON_DEPTH, 50_000, 500_000]) {
        const res = await acc.call({
          method: 'POST',
          url: '/v1/contacts',
          headers,
          payload: `{"phone":"${randomPhone()}","custom_fields":{"x":${deep(levels)}}}`,
        });
        expect(res.statusCode, res.body.slice(0, 200)).toBe(422);
        expect(res.json().error.code).toBe('validation_error');
      }
    }
    expect(await rowCounts(acc.accountId)).toEqual(before);
  });

  it('counts depth on the raw text, ignoring brackets inside strings', () => {
    expect(jsonDepth('{"a":[1,{"b":"[[[[{{{{"}]}')).toBe(3);
    expect(jsonDepth('"\\"[[["')).toBe(0);
    expect(jsonDepth(deep(1000))).toBe(MAX_JSON_DEPTH + 1); // stops counting past the limit
  });
});

describe('date-times', () => {
  it('must exist: no 30 February, no leap second, offsets as ±hh:mm', () => {
    for (const ok of [
      '2026-12-01T10:00:00Z',
      '2026-12-01T10:00:00.123Z',
      '2028-02-29T00:00:00+05:30',
      '2026-12-01t10:00:00z',
    ])
      expect(isExistingDateTime(ok), ok).toBe(true);
    for (const bad of [
      '2026-02-30T00:00:00Z',
      '2027-02-29T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-12-31T23:59:60Z',
      '2026-12-01T10:00:00+05',
      '2026-12-01T10:00:00+0500',
      '2026-12-01T24:00:00Z',
      '2026-12-01T10:00:00+24:00',
      '2026-13-01T10:00:00Z',
      '0000-01-01T00:00:00Z',
      '2026-12-01 10:00:00Z',
    ])
      expect(isExistingDateTime(bad), bad).toBe(false);
  });

  it(`name an instant from ${EARLIEST_DATE_TIME} to ${LATEST_DATE_TIME} once the offset is applied`, () => {
    for (const ok of [
      EARLIEST_DATE_TIME,
      LATEST_DATE_TIME,
      '0001-01-01T00:01:00+00:01',
      '0001-01-01T05:30:00.000+05:30',
      '9999-12-31T23:58:59.999-00:01',
      '9999-12-31T23:59:59.999000000Z',
      '9999-12-31T18:29:59.999-05:30',
    ])
      expect(isExistingDateTime(ok), ok).toBe(true);
    for (const bad of [
      '9999-12-31T23:59:59.999-00:01', // +010000-01-01T00:00:59.999Z
      '9999-12-31T23:59:59-23:59',
      '9999-12-31T23:59:59.9991Z', // PostgreSQL would round it to 10000-01-01
      '9999-12-31T23:59:59.999000001Z',
      '0001-01-01T00:00:00+00:01', // 0000-12-31T23:59:00Z
      '0001-01-01T00:00:00.000+23:59',
      '0001-01-01T05:29:59.999+05:30',
    ])
      expect(isExistingDateTime(bad), bad).toBe(false);
  });

  it('a scheduled_at beyond year 9999 once its offset is applied is a 422: no broadcast, a replay answers the 422, the list still answers', async () => {
    const own = await newAccount(t);
    const before = await rowCounts(own.accountId);
    const body = (when: string) => ({
      name: 'far',
      channel: 'whatsapp',
      audience: { all: true },
      message: { type: 'text', content: 'hi' },
      scheduled_at: when,
    });
    for (const when of [
      '9999-12-31T23:59:59.999-00:01',
      '9999-12-31T23:59:59.9995Z',
      '0001-01-01T00:00:00+00:01',
    ]) {
      for (let attempt = 0; attempt < 2; attempt++) {
        const res = await own.call({
          method: 'POST',
          url: '/v1/broadcasts',
          headers: { 'idempotency-key': `far-${when}` },
          payload: body(when),
        });
        // The second attempt replays the stored 422 (any status but 429 and 5xx is kept).
        const error = expect422(res, 'scheduled_at');
        expect(error.message).toContain(LATEST_DATE_TIME);
      }
    }
    const after = await rowCounts(own.accountId);
    expect({ ...after, idempotency_keys: 0 }).toEqual({ ...before, idempotency_keys: 0 });
    const list = await own.call({ method: 'GET', url: '/v1/broadcasts' });
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json().total).toBe(0);
  });

  it('a date-time in a query string out of range is a 422 too (the webchat visitor `since`)', async () => {
    const own = await newAccount(t);
    const widget = await connectWebchat(own);
    const session = await t.app.inject({
      method: 'POST',
      url: `/webchat/v1/${widget.widget_key}/session`,
      headers: { origin: ORIGIN },
      payload: {},
    });
    expect(session.statusCode, session.body).toBe(200);
    const headers = { origin: ORIGIN, authorization: `Bearer ${session.json().token as string}` };
    const since = (value: string) =>
      t.app.inject({
        method: 'GET',
        url: `/webchat/v1/${widget.widget_key}/messages?since=${encodeURIComponent(value)}`,
        headers,
      });
    for (const bad of ['9999-12-31T23:59:59.999-00:01', '0001-01-01T00:00:00+00:01']) {
      const res = await since(bad);
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().error.details).toEqual([{ field: 'since', issue: expect.any(String) }]);
    }
    const ok = await since(LATEST_DATE_TIME);
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('a scheduled_at that does not exist is a 422 and creates no broadcast', async () => {
    const before = await rowCounts(acc.accountId);
    for (const when of ['2027-02-30T10:00:00Z', '2027-06-30T23:59:60Z', '2027-01-01T10:00:00+05']) {
      expect422(
        await acc.call({
          method: 'POST',
          url: '/v1/broadcasts',
          payload: {
            name: 'later',
            channel: 'whatsapp',
            audience: { all: true },
            message: { type: 'text', content: 'hi' },
            scheduled_at: when,
          },
        }),
        'scheduled_at',
      );
    }
    expect(await rowCounts(acc.accountId)).toEqual(before);
  });
});

describe('a body sent to a route that takes none', () => {
  it('names its fields as unknown (422) and changes nothing; no body or {} is fine', async () => {
    const contact = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone() },
    });
    const { conversation_id: id } = await receive(acc, contact.json().id as string);
    const resolve = (payload?: unknown) =>
      acc.call({
        method: 'POST',
        url: `/v1/conversations/${id}/resolve`,
        ...(payload === undefined ? {} : { payload: payload as object }),
      });

    const refused = expect422(await resolve({ zz: 1, status: 'resolved' }), 'zz');
    expect(refused.details).toEqual([
      { field: 'zz', issue: 'unknown field' },
      { field: 'status', issue: 'unknown field' },
    ]);
    expect422(await resolve([1]), 'body');
    const still = await acc.call({ method: 'GET', url: `/v1/conversations/${id}` });
    expect(still.json().status).toBe('open');

    expect((await resolve({})).statusCode).toBe(200);
    expect((await resolve()).statusCode).toBe(200);
  });
});
