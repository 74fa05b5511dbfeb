import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FORGET_BATCH } from '../../src/webchat/webchat.repository.js';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';
import { connectWebchat, putWebchat, SECRETS_KEY } from './webchat-helpers.js';

let t: TestApp;
let drop: () => Promise<void>;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  drop = db.drop;
  t = await startTestApp({ databaseUrl: db.url, config: { secretsKey: SECRETS_KEY } });
  // Which transaction changed how many rows of each table (this file's database alone).
  await sql`
    CREATE TABLE updates_seen (tbl text, xid xid8, n bigint);
    CREATE FUNCTION note_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO updates_seen SELECT TG_TABLE_NAME, pg_current_xact_id(), count(*) FROM changed;
      RETURN NULL;
    END $$;
    CREATE TRIGGER note_update AFTER UPDATE ON webchat_visitors
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION note_update();
    CREATE TRIGGER note_update AFTER UPDATE ON channel_connections
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION note_update();
  `.execute(t.db);
});
afterAll(async () => {
  await t?.close();
  await drop?.();
});

it('rotating the identity secret of a site with many identified visitors: one short transaction for the secret, the identifiers cleared in batches after it', async () => {
  const acc = await newAccount(t);
  const settings = { identity_verification: 'required' };
  await connectWebchat(acc, settings);
  const other = await newAccount(t);
  await connectWebchat(other, settings);
  const n = 2 * FORGET_BATCH + 321;
  const identified = (accountId: string, count: number) => sql`
    INSERT INTO webchat_visitors (account_id, id, identifier, vouched_by, created_at, updated_at)
    SELECT ${accountId}, 'vis_' || md5(${accountId} || i::text), 'user-' || i,
           (SELECT sha256(secrets) FROM channel_connections
            WHERE account_id = ${accountId} AND channel = 'webchat'),
           now(), now()
    FROM generate_series(1, ${count}::int) i`;
  await identified(acc.accountId, n).execute(t.db);
  await identified(other.accountId, 10).execute(t.db);
  await sql`TRUNCATE updates_seen`.execute(t.db);

  await putWebchat(acc, { ...settings, rotate_identity_secret: true });

  const stillIdentified = async (accountId: string) =>
    (
      await t.db
        .selectFrom('webchat_visitors')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('account_id', '=', accountId)
        .where('identifier', 'is not', null)
        .executeTakeFirstOrThrow()
    ).n;
  expect(Number(await stillIdentified(acc.accountId))).toBe(0);
  expect(Number(await stillIdentified(other.accountId))).toBe(10);

  const { rows } = await sql<{ tbl: string; xid: string; n: number }>`
    SELECT tbl, xid::text, n::int FROM updates_seen WHERE n > 0`.execute(t.db);
  const rotation = rows.filter((r) => r.tbl === 'channel_connections');
  expect(rotation).toHaveLength(1);
  const batches = rows.filter((r) => r.tbl === 'webchat_visitors');
  expect(batches.reduce((sum, b) => sum + b.n, 0)).toBe(n);
  expect(Math.max(...batches.map((b) => b.n))).toBeLessThanOrEqual(FORGET_BATCH);
  expect(batches.length).toBeGreaterThanOrEqual(3);
  // Each batch committed on its own, none in the rotation's transaction.
  expect(new Set(batches.map((b) => b.xid)).size).toBe(batches.length);
  expect(batches.map((b) => b.xid)).not.toContain(rotation[0]!.xid);
});
