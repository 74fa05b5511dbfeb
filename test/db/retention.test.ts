import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  deleteInBatches,
  IDLE_VISITOR_RETENTION_MS,
  INBOUND_WEBHOOK_RETENTION_MS,
  pruneIdleVisitors,
  pruneInboundWebhooks,
} from '../../src/db/retention.js';
import { sql } from 'kysely';
import { newId } from '../../src/ids.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const DAY = 86_400_000;

it('prunes provider webhooks processed before the retention period, never one still unprocessed', async () => {
  const acc = await newAccount(t);
  const now = Date.now();
  const old = new Date(now - INBOUND_WEBHOOK_RETENTION_MS - DAY);
  const recent = new Date(now - DAY);
  const row = (id: string, received: Date, processed: Date | null) => ({
    account_id: acc.accountId,
    id,
    connection_id: 'chn_retention',
    body: Buffer.from('{}'),
    received_at: received,
    processed_at: processed,
  });
  await t.db
    .insertInto('inbound_webhooks')
    .values([
      row('iwh_old_done', old, old),
      row('iwh_old_waiting', old, null), // its job is dead: kept for `jobs retry`
      row('iwh_recent_done', recent, recent),
      ...Array.from({ length: 5 }, (_, i) => row(`iwh_old_${i}`, old, old)),
    ])
    .execute();
  // Batches of 2: five statements for the six old processed ones, every one of them deleted.
  expect(
    await pruneInboundWebhooks(t.db, new Date(now - INBOUND_WEBHOOK_RETENTION_MS), 2),
  ).toBeGreaterThanOrEqual(6);
  const left = await t.db
    .selectFrom('inbound_webhooks')
    .select('id')
    .where('account_id', '=', acc.accountId)
    .orderBy('id')
    .execute();
  expect(left.map((r) => r.id)).toEqual(['iwh_old_waiting', 'iwh_recent_done']);
});

it('forgets old widget visitors that never wrote and are not identified, and no other', async () => {
  const acc = await newAccount(t);
  const now = Date.now();
  const old = new Date(now - IDLE_VISITOR_RETENTION_MS - DAY);
  const recent = new Date(now - DAY);
  const visitor = (id: string, created: Date, identifier: string | null = null) => ({
    account_id: acc.accountId,
    id,
    identifier,
    created_at: created,
    updated_at: created,
  });
  await t.db
    .insertInto('webchat_visitors')
    .values([
      visitor('wv_old_idle', old),
      visitor('wv_old_wrote', old),
      visitor('wv_old_identified', old, 'user-42'),
      visitor('wv_recent_idle', recent),
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

  expect(
    await pruneIdleVisitors(t.db, new Date(now - IDLE_VISITOR_RETENTION_MS)),
  ).toBeGreaterThanOrEqual(1);
  const left = await t.db
    .selectFrom('webchat_visitors')
    .select('id')
    .where('account_id', '=', acc.accountId)
    .orderBy('id')
    .execute();
  expect(left.map((r) => r.id)).toEqual(['wv_old_identified', 'wv_old_wrote', 'wv_recent_idle']);
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
