import { Migrator } from 'kysely';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { createDb, migrate, migrations } from '../../src/db/database.js';
import { createPrivateDatabase } from '../helpers.js';
import { sealForTests } from '../secrets-key.js';

it('migration 019 brings a broadcast scheduled past year 9999 back to the last instant that can be read', async () => {
  const database = await createPrivateDatabase({ migrated: false });
  const db = createDb(database.url, { max: 2 });
  try {
    const before = Object.fromEntries(
      Object.entries(migrations(null)).filter(([name]) => name < '019'),
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
    const row = (id: string, scheduledAt: string) => sql`
      INSERT INTO broadcasts (account_id, id, name, channel, audience, message, status, scheduled_at, created_at, updated_at)
      VALUES ('acc_old', ${id}, 'b', 'whatsapp', '{"all":true}', '{"type":"text","content":"x"}', 'scheduled',
              ${scheduledAt}::timestamptz, ${now}, ${now})`;
    // What `9999-12-31T23:59:59.999-00:01` was stored as before the range check.
    await row('bc_late', '9999-12-31T23:59:59.999-00:01').execute(db);
    await row('bc_fine', '2030-03-01T08:00:00Z').execute(db);

    await migrate(db, sealForTests);

    const rows = await db
      .selectFrom('broadcasts')
      .select(['id', 'scheduled_at'])
      .orderBy('id')
      .execute();
    expect(rows.map((r) => [r.id, r.scheduled_at!.toISOString()])).toEqual([
      ['bc_fine', '2030-03-01T08:00:00.000Z'],
      ['bc_late', '9999-12-31T23:59:59.999Z'],
    ]);
  } finally {
    await db.destroy();
    await database.drop();
  }
});
