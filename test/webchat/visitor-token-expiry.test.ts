import { afterAll, beforeAll, expect, it } from 'vitest';
import { VISITOR_TOKEN_TTL_MS } from '../../src/webchat/visitor-token.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { expectError, expectStatus, freezeClock } from '../inbox-helpers.js';
import { connectWebchat, ORIGIN, SECRETS_KEY } from './webchat-helpers.js';

// Visitor tokens are dated: good for 30 days, and exchanged for a fresh one at every session
// start (each page load). This file moves its app's clock by weeks, so it has an app of its own.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    config: { secretsKey: SECRETS_KEY },
    webchatLimits: { perAddress: 100_000, perVisitor: 100_000 },
  });
  freezeClock(t.clock);
});
afterAll(() => t.close());

const DAY = 24 * 3600_000;

it('a visitor who comes back within 30 days keeps their conversation; a token older than that is refused', async () => {
  expect(VISITOR_TOKEN_TTL_MS).toBe(30 * DAY);
  const acc = await newAccount(t);
  const c = await connectWebchat(acc);
  const call = (method: 'GET' | 'POST', path: string, token?: string, payload?: object) =>
    t.app.inject({
      method,
      url: `/webchat/v1/${c.widget_key}/${path}`,
      headers: { origin: ORIGIN, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      ...(payload ? { payload } : {}),
    });
  const start = async (token?: string) => {
    const res = await call('POST', 'session', undefined, token ? { token } : {});
    expectStatus(res, 200);
    return res.json<{ token: string; visitor: { id: string } }>();
  };

  const first = await start();
  expectStatus(
    await call('POST', 'messages', first.token, { client_id: 'client_0001', content: 'hi' }),
    201,
  );

  // 29 days on, the page loads again: same visitor, same conversation, a fresh token.
  t.clock.advance(29 * DAY);
  const back = await start(first.token);
  expect(back.visitor.id).toBe(first.visitor.id);
  expect(back.token).not.toBe(first.token);
  const history = await call('GET', 'messages', back.token);
  expectStatus(history, 200);
  expect(history.json().data.map((m: { content: string }) => m.content)).toEqual(['hi']);

  // 29 more days: the first token is 58 days old and refused everywhere; the fresh one is good.
  t.clock.advance(29 * DAY);
  expectError(await call('GET', 'messages', first.token), 401);
  expectError(
    await call('POST', 'messages', first.token, { client_id: 'client_0002', content: 'x' }),
    401,
  );
  expectStatus(await call('GET', 'messages', back.token), 200);
  const stale = await start(first.token);
  expect(stale.visitor.id).not.toBe(first.visitor.id);

  // Left alone for more than 30 days, even the freshest token has lapsed: a new visitor.
  t.clock.advance(31 * DAY);
  expectError(await call('GET', 'messages', back.token), 401);
  expect((await start(back.token)).visitor.id).not.toBe(first.visitor.id);
});

it('a token dated in the future (beyond a few minutes of clock drift) is refused', async () => {
  const acc = await newAccount(t);
  const c = await connectWebchat(acc);
  const start = await t.app.inject({
    method: 'POST',
    url: `/webchat/v1/${c.widget_key}/session`,
    headers: { origin: ORIGIN },
    payload: {},
  });
  const { token } = start.json<{ token: string }>();
  const messages = () =>
    t.app.inject({
      method: 'GET',
      url: `/webchat/v1/${c.widget_key}/messages`,
      headers: { origin: ORIGIN, authorization: `Bearer ${token}` },
    });
  t.clock.advance(-60_000);
  expectStatus(await messages(), 200);
  t.clock.advance(-10 * 60_000);
  expectError(await messages(), 401);
  t.clock.advance(11 * 60_000);
  expectStatus(await messages(), 200);
});
