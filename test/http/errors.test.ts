import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createDb } from '../../src/db/database.js';
import { MemoryRateLimiter } from '../../src/http/rate-limiter.js';
import {
  ADMIN_TOKEN,
  newAccount,
  randomPhone,
  startTestApp,
  TestClock,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { testDatabaseUrl } from '../database.js';

let t: TestApp;
let acc: TestAccount;
beforeAll(async () => {
  t = await startTestApp();
  acc = await newAccount(t);
});
afterAll(() => t.close());

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The envelope every failure answers with: { error: { code, message } } and nothing else at the top. */
function expectEnvelope(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json();
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  expectNoStack(res);
  return body.error as {
    code: string;
    message: string;
    details?: { field: string; issue: string }[];
  };
}

function expectNoStack(res: LightMyRequestResponse) {
  expect(res.body).not.toMatch(/"stack"/);
  expect(res.body).not.toMatch(/\bat .+:\d+:\d+/); // a stack frame: "at fn (file.ts:12:34)"
  expect(res.body).not.toMatch(/node_modules|\/src\/|\.ts:\d+/);
}

describe('error envelope', () => {
  it('carries details [{ field, issue }] for a 422', async () => {
    const res = await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: 'nope' } });
    const error = expectEnvelope(res, 422, 'validation_error');
    expect(error.details).toEqual([{ field: 'phone', issue: expect.any(String) }]);
    expect(error.message).toContain('phone');
  });

  it('has no details for errors that are not about fields', async () => {
    const res = await acc.call({ method: 'GET', url: '/v1/contacts/con_missing' });
    const error = expectEnvelope(res, 404, 'not_found');
    expect(error).not.toHaveProperty('details');
  });
});

describe('request body errors', () => {
  it('answers 400 invalid_request to malformed JSON', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      headers: { 'content-type': 'application/json' },
      payload: '{"phone": "+14155550123",',
    });
    expectEnvelope(res, 400, 'invalid_request');
  });

  it('answers 400 invalid_request to an empty body declared as JSON', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      headers: { 'content-type': 'application/json' },
      payload: '',
    });
    expectEnvelope(res, 400, 'invalid_request');
  });

  it('answers 400 invalid_request to a text/plain body', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      headers: { 'content-type': 'text/plain' },
      payload: JSON.stringify({ phone: randomPhone() }),
    });
    expectEnvelope(res, 400, 'invalid_request');
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).json().total).toBe(0);
  });

  it('answers 400 invalid_request to a form-encoded body', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'phone=%2B14155550123',
    });
    expectEnvelope(res, 400, 'invalid_request');
  });

  it('answers 413 payload_too_large to a body over 1 MiB', async () => {
    const big = JSON.stringify({ phone: randomPhone(), name: 'x'.repeat(1024 * 1024) });
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      headers: { 'content-type': 'application/json' },
      payload: big,
    });
    expectEnvelope(res, 413, 'payload_too_large');
  });

  it('answers 422 naming an unknown body field', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), nickname: 'x' },
    });
    const error = expectEnvelope(res, 422, 'validation_error');
    expect(error.details?.map((d) => d.field)).toContain('nickname');
    expect(error.message).toContain('nickname');
  });

  it('answers 422 to a body that is JSON but not an object', async () => {
    for (const payload of ['[]', '"x"', '42', 'null']) {
      const res = await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        headers: { 'content-type': 'application/json' },
        payload,
      });
      expect([400, 422], payload).toContain(res.statusCode);
      expectNoStack(res);
      expect(res.json().error.code).toMatch(/^(invalid_request|validation_error)$/);
    }
  });
});

describe('one issue for a value that matches no allowed form', () => {
  const asAdmin = (payload: object) =>
    t.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload,
    });

  it.each([
    [
      'an unknown value of a literal union',
      { name: 'Acme', plan: 'gold' },
      'plan',
      'must be one of starter, growth, enterprise',
    ],
    [
      'a nullable integer over its maximum',
      { name: 'Acme', plan: 'growth', rate_limit_per_minute: 5_000_000 },
      'rate_limit_per_minute',
      'must be <= 1000000',
    ],
    [
      'a nullable integer of the wrong type',
      { name: 'Acme', plan: 'growth', rate_limit_per_minute: 'many' },
      'rate_limit_per_minute',
      'must be integer or null',
    ],
  ])('%s', async (_case, payload, field, issue) => {
    const error = expectEnvelope(await asAdmin(payload), 422, 'validation_error');
    expect(error.details).toEqual([{ field, issue }]);
    expect(error.message).toBe(`${field}: ${issue}`);
  });

  it('names the accepted types of a nullable string and of a custom field value', async () => {
    const name = expectEnvelope(
      await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: randomPhone(), name: 5 },
      }),
      422,
      'validation_error',
    );
    expect(name.details).toEqual([{ field: 'name', issue: 'must be string or null' }]);

    const value = expectEnvelope(
      await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: randomPhone(), custom_fields: { seats: [1] } },
      }),
      422,
      'validation_error',
    );
    expect(value.details).toEqual([
      { field: 'custom_fields.seats', issue: 'must be string, number or boolean' },
    ]);
  });
});

describe('unknown route', () => {
  it('answers 404 not_found without a key', async () => {
    expectEnvelope(
      await t.app.inject({ method: 'GET', url: '/v1/nothing-here' }),
      404,
      'not_found',
    );
    expectEnvelope(await t.app.inject({ method: 'GET', url: '/nothing' }), 404, 'not_found');
  });

  it('answers 404 not_found with a key, also for a known path with an unknown method', async () => {
    expectEnvelope(await acc.call({ method: 'GET', url: '/v1/nothing-here' }), 404, 'not_found');
    expectEnvelope(
      await acc.call({ method: 'POST', url: '/v1/contacts/x/y/z', payload: {} }),
      404,
      'not_found',
    );
    expectEnvelope(await acc.call({ method: 'PATCH', url: '/v1/contacts' }), 404, 'not_found');
  });
});

describe('an overlong id and a URL that is not percent-encoded UTF-8', () => {
  const longId = `con_${'A'.repeat(120)}`;

  it('an overlong id reaches its route: 401 without a key, 404 with one, each with the usual headers', async () => {
    const anonymous = await t.app.inject({
      method: 'GET',
      url: `/v1/contacts/${longId}`,
      headers: { 'x-request-id': 'req-long-id-1' },
    });
    expectEnvelope(anonymous, 401, 'unauthorized');
    expect(anonymous.headers['x-request-id']).toBe('req-long-id-1');

    const known = await acc.call({
      method: 'GET',
      url: `/v1/contacts/${longId}`,
      headers: { 'x-request-id': 'req-long-id-2' },
    });
    expectEnvelope(known, 404, 'not_found');
    expect(known.headers['x-request-id']).toBe('req-long-id-2');
    expect(known.headers['x-ratelimit-limit']).toBeDefined();
    expect(known.headers['x-ratelimit-remaining']).toBeDefined();
  });

  it('a malformed percent-encoding is a 400 that carries the request id given', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts/%E0%A4%A',
      headers: { 'x-request-id': 'req-bad-url-1' },
    });
    expectEnvelope(res, 400, 'invalid_request');
    expect(res.headers['x-request-id']).toBe('req-bad-url-1');
  });
});

describe('internal errors', () => {
  async function appOn(url: string) {
    const db = createDb(url, { max: 1 });
    const rateLimiter = new MemoryRateLimiter();
    const { app } = await buildApp({
      config: { ...loadConfig({}), adminToken: null, logLevel: 'silent' },
      db,
      rateLimiter,
      clock: new TestClock(),
    });
    return {
      app,
      close: async () => {
        await app.close();
        await rateLimiter.close();
        await db.destroy();
      },
    };
  }

  it('answer 500 internal_error with a request_id and no stack trace or driver message', async () => {
    // A session whose search_path finds none of the tables: the first query fails inside the
    // request with an error that is no client's doing and not an outage.
    const url = new URL(testDatabaseUrl());
    url.searchParams.set('options', '-c search_path=nowhere');
    const { app, close } = await appOn(url.toString());
    try {
      const res = await app.inject({
        method: 'GET',
        url: '/v1/contacts',
        headers: { authorization: 'Bearer sb_live_whatever', 'x-request-id': 'req-500' },
      });
      expectEnvelope(res, 500, 'internal_error');
      expect(res.json().error.request_id).toBe('req-500');
      expect(res.body).not.toMatch(/relation|api_keys|nowhere/i);
    } finally {
      await close();
    }
  });

  it('answer 503 unavailable with Retry-After while the database cannot be reached', async () => {
    // A database nobody listens on: the first query fails inside the request.
    const { app, close } = await appOn('postgres://nobody@127.0.0.1:1/none');
    try {
      const res = await app.inject({
        method: 'GET',
        url: '/v1/contacts',
        headers: { authorization: 'Bearer sb_live_whatever', 'x-request-id': 'req-503' },
      });
      expectEnvelope(res, 503, 'unavailable');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(res.json().error.request_id).toBe('req-503');
      expect(res.body).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|connect/i);
      const ready = await app.inject({ method: 'GET', url: '/readyz' });
      expectEnvelope(ready, 503, 'unavailable');
    } finally {
      await close();
    }
  });
});

describe('no stack trace in any error body', () => {
  it('holds for 400, 401, 403, 404, 409, 413 and 422 answers', async () => {
    const starter = await newAccount(t, { plan: 'starter' });
    const phone = randomPhone();
    await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } });
    const answers = await Promise.all([
      acc.call({
        method: 'POST',
        url: '/v1/contacts',
        headers: { 'content-type': 'application/json' },
        payload: '{',
      }),
      t.app.inject({ method: 'GET', url: '/v1/contacts' }),
      starter.call({ method: 'GET', url: '/v1/contacts' }),
      acc.call({ method: 'GET', url: '/v1/contacts/con_x' }),
      acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } }),
      acc.call({
        method: 'POST',
        url: '/v1/contacts',
        headers: { 'content-type': 'application/json' },
        payload: `"${'x'.repeat(1024 * 1024 + 10)}"`,
      }),
      acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: 1 } }),
    ]);
    expect(answers.map((r) => r.statusCode)).toEqual([400, 401, 403, 404, 409, 413, 422]);
    for (const res of answers) expectNoStack(res);
  });
});

describe('X-Request-Id', () => {
  it('echoes a given id, on success and on error', async () => {
    const ok = await acc.call({
      method: 'GET',
      url: '/v1/contacts',
      headers: { 'x-request-id': 'client-req_1.2:3' },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-request-id']).toBe('client-req_1.2:3');
    const missing = await t.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { 'x-request-id': 'abc-401' },
    });
    expect(missing.statusCode).toBe(401);
    expect(missing.headers['x-request-id']).toBe('abc-401');
    const notFound = await t.app.inject({
      method: 'GET',
      url: '/v1/nope',
      headers: { 'x-request-id': 'abc-404' },
    });
    expect(notFound.headers['x-request-id']).toBe('abc-404');
  });

  it('generates a fresh id when none is given', async () => {
    const a = await acc.call({ method: 'GET', url: '/v1/contacts' });
    const b = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(a.headers['x-request-id']).toMatch(UUID);
    expect(b.headers['x-request-id']).toMatch(UUID);
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
    const err = await t.app.inject({ method: 'GET', url: '/v1/contacts' });
    expect(err.headers['x-request-id']).toMatch(UUID);
  });

  it('replaces an unusable id (spaces, too long) with a generated one', async () => {
    for (const given of ['has space', 'x'.repeat(129), 'semi;colon']) {
      const res = await acc.call({
        method: 'GET',
        url: '/v1/contacts',
        headers: { 'x-request-id': given },
      });
      expect(res.headers['x-request-id']).toMatch(UUID);
    }
  });
});

describe('unknown query parameters on routes that take none', () => {
  it.each<['GET' | 'POST', string]>([
    ['GET', '/v1/users/usr_x?expand=all'],
    ['POST', '/v1/conversations/conv_x/resolve?force=true'],
    ['GET', '/v1/webhooks?page=2'],
  ])('%s %s → 422 naming the parameter', async (method, url) => {
    const acc = await newAccount(t);
    const res = await acc.call({ method, url });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.code).toBe('validation_error');
    expect(res.json().error.details[0].issue).toBe('unknown query parameter');
  });
});
