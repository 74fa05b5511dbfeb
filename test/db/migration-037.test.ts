import { Migrator, sql } from 'kysely';
import { expect, it } from 'vitest';
import { createDb, migrate, migrations } from '../../src/db/database.js';
import { createPrivateDatabase } from '../helpers.js';
import { sealForTests } from '../secrets-key.js';

it('migration 037 keeps the identifications of a connected webchat, vouched for by its secret, and ends those of a connection gone', async () => {
  const database = await createPrivateDatabase({ migrated: false });
  const db = createDb(database.url, { max: 2 });
  try {
    const before = Object.fromEntries(
      Object.entries(migrations(null)).filter(([name]) => name < '037'),
    );
    expect(
      (
        await new Migrator({
          db,
          provider: { getMigrations: async () => before },
        }).migrateToLatest()
      ).error,
    ).toBeUndefined();
    const now = new Date('2026-11-01T10:00:00Z');
    await sql`
      INSERT INTO channel_connections (account_id, id, channel, provider, status, settings, secrets, created_at, updated_at)
      VALUES ('acc_a', 'chn_a', 'webchat', 'webchat', 'active', '{}', '\\x0102'::bytea, ${now}, ${now})`.execute(
      db,
    );
    const visitor = (account: string, id: string, identifier: string | null) => sql`
      INSERT INTO webchat_visitors (account_id, id, identifier, created_at, updated_at)
      VALUES (${account}, ${id}, ${identifier}, ${now}, ${now})`;
    await visitor('acc_a', 'vis_1', 'user-1').execute(db);
    await visitor('acc_a', 'vis_2', null).execute(db);
    // acc_b's webchat was disconnected: its identifications were to end at the next connection.
    await visitor('acc_b', 'vis_3', 'user-3').execute(db);

    await migrate(db, sealForTests);

    const rows = await sql<{ id: string; identifier: string | null; vouched: boolean | null }>`
      SELECT id, identifier, vouched_by = sha256('\\x0102'::bytea) AS vouched
      FROM webchat_visitors ORDER BY id`.execute(db);
    expect(rows.rows).toEqual([
      { id: 'vis_1', identifier: 'user-1', vouched: true },
      { id: 'vis_2', identifier: null, vouched: null },
      { id: 'vis_3', identifier: null, vouched: null },
    ]);
  } finally {
    await db.destroy();
    await database.drop();
  }
});
