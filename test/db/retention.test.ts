import { afterAll, beforeAll, expect, it } from 'vitest';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { VISITOR_TOKEN_TTL_MS } from '../../src/webchat/visitor-token.js';
import { VISITOR_SEEN_EVERY_MS } from '../../src/webchat/webchat.repository.js';
import { createDb, type Db } from '../../src/db/database.js';
import { deleteInBatches, scheduleRetention } from '../../src/db/retention.js';
import {
  INBOUND_WEBHOOK_RETENTION_MS,
  PROVIDER_ID_ALIAS_RETENTION_MS,
  inboundPruneTasks,
  pruneInboundWebhooks,
  pruneProviderIdAliases,
} from '../../src/inbound/retention.js';
import {
  IDLE_VISITOR_RETENTION_MS,
  pruneIdleVisitors,
  webchatPruneTasks,
} from '../../src/webchat/retention.js';
import { newId } from '../../src/ids.js';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';

// Retention deletes across every account of its database, so this file has a database of its
// own: the counts below are exact.
let database: Awaited<ReturnType<typeof createPrivateDatabase>>;
let t: TestApp;
beforeAll(async () => {
  database = await createPrivateDatabase();
  t = await startTestApp({ databaseUrl: database.url, readCache: false });
});
afterAll(async () => {
  await t?.close();
  await database?.drop();
});

const DAY = 86_400_000;

const webhook = (id: string, received: Date, processed: Date | null) => ({
  account_id: 'acc_retention',
  id,
  connection_id: 'chn_retention',
  body: Buffer.from('{}'),
  received_at: received,
  processed_at: processed,
});

async function ids(db: Db, table: 'inbound_webhooks' | 'webchat_visitors'): Promise<string[]> {
  const rows = await db.selectFrom(table).select('id').orderBy('id').execute();
  return rows.map((r) => r.id);
}

it('prunes provider webhooks processed before the retention period, however recently received, never one still unprocessed', async () => {
  const now = Date.now();
  const old = new Date(now - INBOUND_WEBHOOK_RETENTION_MS - DAY);
  const recent = new Date(now - DAY);
  await t.db
    .insertInto('inbound_webhooks')
    .values([
      webhook('iwh_old_done', old, old),
      webhook('iwh_old_waiting', old, null), // its job is dead: kept for `jobs retry`
      // Dead, then replayed with `switchboard jobs retry` yesterday: kept 7 days from then.
      webhook('iwh_old_replayed', old, recent),
      webhook('iwh_recent_done', recent, recent),
      ...Array.from({ length: 5 }, (_, i) => webhook(`iwh_old_${i}`, old, old)),
    ])
    .execute();
  // Batches of 2: four statements for the six old processed ones, every one of them deleted.
  expect(await pruneInboundWebhooks(t.db, new Date(now - INBOUND_WEBHOOK_RETENTION_MS), 2)).toBe(6);
  expect(await ids(t.db, 'inbound_webhooks')).toEqual([
    'iwh_old_replayed',
    'iwh_old_waiting',
    'iwh_recent_done',
  ]);
  await t.db.deleteFrom('inbound_webhooks').execute();
});

it('forgets widget visitors not seen for longer than their token lasts, that never wrote and are not identified, and no other', async () => {
  // Seen at most a day before its latest token was issued, a visitor is forgotten only once
  // every token it holds has lapsed.
  expect(IDLE_VISITOR_RETENTION_MS).toBeGreaterThan(VISITOR_TOKEN_TTL_MS + VISITOR_SEEN_EVERY_MS);
  const acc = await newAccount(t);
  const now = Date.now();
  const old = new Date(now - IDLE_VISITOR_RETENTION_MS - DAY);
  const recent = new Date(now - DAY);
  const visitor = (id: string, created: Date, seen: Date, identifier: string | null = null) => ({
    account_id: acc.accountId,
    id,
    identifier,
    created_at: created,
    updated_at: seen,
  });
  await t.db
    .insertInto('webchat_visitors')
    .values([
      visitor('wv_old_idle', old, old),
      visitor('wv_old_wrote', old, old),
      visitor('wv_old_identified', old, old, 'user-42'),
      // Made long ago, its session resumed yesterday: its token is good for a month yet.
      visitor('wv_old_back', old, recent),
      visitor('wv_recent_idle', recent, recent),
    ])
    .execute();
  // The one that wrote has a contact holding its webchat identity.
  const contactId = newId('con');
  await sql`
    INSERT INTO contacts (account_id, id, phone, name, email, tags, lifecycle_stage, custom_fields, created_at, updated_at)
    VALUES (${acc.accountId}, ${contactId}, NULL, NULL, NULL, '{}', NULL, '{}', ${old}, ${old})`.execute(
    t.db,
  );
  await sql`
    INSERT INTO contact_identities (account_id, contact_id, channel, external_id, created_at)
    VALUES (${acc.accountId}, ${contactId}, 'webchat', 'wv_old_wrote', ${old})`.execute(t.db);

  expect(await pruneIdleVisitors(t.db, new Date(now - IDLE_VISITOR_RETENTION_MS))).toBe(1);
  expect(await ids(t.db, 'webchat_visitors')).toEqual([
    'wv_old_back',
    'wv_old_identified',
    'wv_old_wrote',
    'wv_recent_idle',
  ]);
});

it('prunes aliases of provider message ids older than their retention, and no other', async () => {
  const now = Date.now();
  const alias = (account: string, id: string, at: Date) => ({
    account_id: account,
    alias: id,
    provider_message_id: `m_${id}`,
    created_at: at,
  });
  const old = new Date(now - PROVIDER_ID_ALIAS_RETENTION_MS - DAY);
  const recent = new Date(now - DAY);
  await t.db
    .insertInto('provider_id_aliases')
    .values([
      alias('acc_a', 'mid_old_1', old),
      alias('acc_b', 'mid_old_2', old),
      alias('acc_a', 'mid_old_3', old),
      alias('acc_a', 'mid_recent', recent),
    ])
    .execute();
  expect(
    await pruneProviderIdAliases(t.db, new Date(now - PROVIDER_ID_ALIAS_RETENTION_MS), 2),
  ).toBe(3);
  const left = await t.db.selectFrom('provider_id_aliases').select('alias').execute();
  expect(left.map((r) => r.alias)).toEqual(['mid_recent']);
  await t.db.deleteFrom('provider_id_aliases').execute();
});

it('a retention run still going when the next is due makes that one skip', async () => {
  const db = createDb(database.url, { max: 10 });
  const logged: string[] = [];
  const log = {
    info: () => logged.push('info'),
    warn: () => logged.push('warn'),
  } as unknown as FastifyBaseLogger;
  const waitingDeletes = async () => {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND query LIKE 'DELETE FROM "inbound_webhooks"%'`.execute(t.db);
    return rows[0]!.n;
  };
  const until = async (what: () => Promise<boolean>) => {
    for (let i = 0; i < 200 && !(await what()); i++) await new Promise((r) => setTimeout(r, 25));
    expect(await what()).toBe(true);
  };
  const old = new Date(Date.now() - INBOUND_WEBHOOK_RETENTION_MS - DAY);
  await t.db.deleteFrom('inbound_webhooks').execute();
  await t.db
    .insertInto('inbound_webhooks')
    .values(webhook('iwh_slow', old, old))
    .execute();

  // A slow run: its first statement waits for a lock held here.
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const holding = t.db.transaction().execute(async (trx) => {
    await sql`LOCK TABLE inbound_webhooks IN ACCESS EXCLUSIVE MODE`.execute(trx);
    locked();
    await released;
  });
  await isLocked;
  const stop = scheduleRetention(
    { db, clock: t.clock, log },
    [...inboundPruneTasks, ...webchatPruneTasks],
    20,
  );
  try {
    await until(async () => (await waitingDeletes()) === 1);
    // Fifteen runs were due meanwhile; none started beside the one waiting.
    await new Promise((r) => setTimeout(r, 300));
    expect(await waitingDeletes()).toBe(1);
    release();
    await holding;
    await until(async () => logged.length === 1);
    expect(await ids(t.db, 'inbound_webhooks')).toEqual([]);
    // Once it is over, runs go on.
    await t.db
      .insertInto('inbound_webhooks')
      .values(webhook('iwh_later', old, old))
      .execute();
    await until(async () => (await ids(t.db, 'inbound_webhooks')).length === 0);
    expect(logged.every((l) => l === 'info')).toBe(true);
  } finally {
    release();
    stop();
    await holding;
    await db.destroy();
  }
});

it('deletes in batches until a short one: no row due is left behind', async () => {
  const acc = await newAccount(t);
  const at = new Date(Date.now() - 9 * DAY);
  await t.db
    .insertInto('webhook_attempts')
    .values(
      Array.from({ length: 7 }, (_, i) => ({
        account_id: acc.accountId,
        id: newId('dlv'),
        webhook_id: 'wh_batches',
        event_id: `evt_${i}`,
        event_type: 'contact.created',
        attempt: 1,
        status_code: 200,
        error: null,
        duration_ms: 1,
        created_at: at,
      })),
    )
    .execute();
  const statements: number[] = [];
  const deleted = await deleteInBatches(
    t.db,
    'webhook_attempts',
    (limit) => {
      statements.push(limit);
      return sql`SELECT ctid FROM webhook_attempts
        WHERE account_id = ${acc.accountId} AND webhook_id = 'wh_batches' LIMIT ${limit}`;
    },
    3,
  );
  expect(deleted).toBe(7);
  expect(statements).toHaveLength(3); // 3, 3, then 1 < 3
});
