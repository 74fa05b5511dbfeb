import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { VISITOR_SEEN_EVERY_MS } from '../../src/webchat/webchat.repository.js';
import { IDLE_VISITOR_RETENTION_MS, pruneIdleVisitors } from '../../src/webchat/retention.js';
import {
  createPrivateDatabase,
  newAccount,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { expectStatus, freezeClock } from '../inbox-helpers.js';
import { connectWebchat, ORIGIN, SECRETS_KEY, type WebchatConnection } from './webchat-helpers.js';

// Retention forgets anonymous visitors that never wrote once they have not been seen for longer
// than their token lasts. This file prunes with its clock moved by weeks, which would forget
// other files' visitors, so it has a database of its own.
let database: Awaited<ReturnType<typeof createPrivateDatabase>>;
let t: TestApp;
let base: string;
beforeAll(async () => {
  database = await createPrivateDatabase();
  t = await startTestApp({
    databaseUrl: database.url,
    config: { secretsKey: SECRETS_KEY },
    webchatLimits: { perAddress: 100_000, perVisitor: 100_000 },
  });
  freezeClock(t.clock);
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await t?.close();
  await database?.drop();
});

const DAY = 86_400_000;

async function widget(): Promise<{ acc: TestAccount; c: WebchatConnection }> {
  const acc = await newAccount(t);
  return { acc, c: await connectWebchat(acc) };
}

async function start(c: WebchatConnection, token?: string) {
  const res = await t.app.inject({
    method: 'POST',
    url: `/webchat/v1/${c.widget_key}/session`,
    headers: { origin: ORIGIN },
    payload: token ? { token } : {},
  });
  expectStatus(res, 200);
  return res.json<{ token: string; visitor: { id: string } }>();
}

const prune = () =>
  pruneIdleVisitors(t.db, new Date(t.clock.now().getTime() - IDLE_VISITOR_RETENTION_MS));

async function seenAt(accountId: string, id: string): Promise<number | undefined> {
  const row = await t.db
    .selectFrom('webchat_visitors')
    .select('updated_at')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.updated_at.getTime();
}

it('a visitor who reloads the page every few days without writing is never forgotten', async () => {
  const { c } = await widget();
  const first = await start(c);
  let token = first.token;
  // Ten weeks of a page load every four days, retention running daily meanwhile.
  for (let day = 1; day <= 70; day++) {
    t.clock.advance(DAY);
    await prune();
    if (day % 4 === 0) {
      const back = await start(c, token);
      expect(back.visitor.id).toBe(first.visitor.id);
      token = back.token;
    }
  }
  // Gone for good: once its freshest token has lapsed, it is forgotten.
  t.clock.advance(IDLE_VISITOR_RETENTION_MS);
  expect(await prune()).toBe(1);
  expect((await start(c, token)).visitor.id).not.toBe(first.visitor.id);
});

it('a resumed session marks its visitor seen at most once a day', async () => {
  const { acc, c } = await widget();
  const first = await start(c);
  const madeAt = t.clock.now().getTime();
  expect(await seenAt(acc.accountId, first.visitor.id)).toBe(madeAt);

  // Page loads within the day write nothing.
  t.clock.advance(VISITOR_SEEN_EVERY_MS / 2);
  await start(c, first.token);
  t.clock.advance(VISITOR_SEEN_EVERY_MS / 2);
  await start(c, first.token);
  expect(await seenAt(acc.accountId, first.visitor.id)).toBe(madeAt);

  // The first one past it does.
  t.clock.advance(1);
  const back = await start(c, first.token);
  expect(back.visitor.id).toBe(first.visitor.id);
  expect(await seenAt(acc.accountId, first.visitor.id)).toBe(t.clock.now().getTime());
});

it('a stream whose visitor was forgotten ends with identify, and the session it starts again makes a new visitor', async () => {
  const { acc, c } = await widget();
  const visitor = await start(c);
  const abort = new AbortController();
  const res = await fetch(
    `${base}/webchat/v1/${c.widget_key}/stream?token=${encodeURIComponent(visitor.token)}`,
    { headers: { origin: ORIGIN }, signal: abort.signal },
  );
  expect(res.status).toBe(200);
  try {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const read = async () => {
      const chunk = await reader.read();
      if (chunk.done) return false;
      text += decoder.decode(chunk.value, { stream: true });
      return true;
    };
    while (!text.includes('event: ready')) expect(await read()).toBe(true);

    // Retention forgets it (as it would have, under created_at, while its page was open).
    await t.db
      .deleteFrom('webchat_visitors')
      .where('account_id', '=', acc.accountId)
      .where('id', '=', visitor.visitor.id)
      .execute();
    await t.services.webchat.wakeups.publish(acc.accountId, visitor.visitor.id);
    const ended = (async () => {
      while (await read());
    })();
    await Promise.race([ended, new Promise((r) => setTimeout(r, 3_000))]);
    expect(text).toContain('event: end\ndata: {"reason":"identify"}\n\n');
    expect(text).not.toContain('"reason":"gone"');
  } finally {
    abort.abort();
  }
  // What the widget then does: start a session with its kept token, which names no visitor now.
  const again = await start(c, visitor.token);
  expect(again.visitor.id).not.toBe(visitor.visitor.id);
});
