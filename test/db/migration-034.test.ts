import { Migrator } from 'kysely';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { createDb, migrate, migrations } from '../../src/db/database.js';
import { createPrivateDatabase } from '../helpers.js';
import { sealForTests } from '../secrets-key.js';

it("migration 034 counts the contacts already stored, by stage and by tag and stage, each contact's tag once", async () => {
  const database = await createPrivateDatabase({ migrated: false });
  const db = createDb(database.url, { max: 2 });
  try {
    const before = Object.fromEntries(
      Object.entries(migrations(null)).filter(([name]) => name < '034'),
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
    const contact = (account: string, id: string, tags: string[], stage: string | null) => sql`
      INSERT INTO contacts (account_id, id, phone, tags, lifecycle_stage, custom_fields, created_at, updated_at)
      VALUES (${account}, ${id}, ${`+1415555${id.slice(-4)}`}, ${tags}::text[], ${stage}, '{}', ${now}, ${now})`;
    await contact('acc_a', 'con_0001', ['vip', 'vip', 'x'], 'lead').execute(db);
    await contact('acc_a', 'con_0002', ['vip'], null).execute(db);
    await contact('acc_a', 'con_0003', [], 'lead').execute(db);
    await contact('acc_b', 'con_0004', ['vip'], 'customer').execute(db);

    await migrate(db, sealForTests);

    const stages = await sql<{ k: string; n: string }>`
      SELECT account_id || '/' || lifecycle_stage AS k, sum(n) AS n FROM contact_counts
      GROUP BY 1 ORDER BY 1`.execute(db);
    expect(stages.rows.map((r) => [r.k, Number(r.n)])).toEqual([
      ['acc_a/', 1],
      ['acc_a/lead', 2],
      ['acc_b/customer', 1],
    ]);
    const tags = await sql<{ k: string; n: string }>`
      SELECT account_id || '/' || tag || '/' || lifecycle_stage AS k, sum(n) AS n
      FROM contact_tag_counts GROUP BY 1 ORDER BY 1`.execute(db);
    expect(tags.rows.map((r) => [r.k, Number(r.n)])).toEqual([
      ['acc_a/vip/', 1],
      ['acc_a/vip/lead', 1],
      ['acc_a/x/lead', 1],
      ['acc_b/vip/customer', 1],
    ]);
  } finally {
    await db.destroy();
    await database.drop();
  }
});
