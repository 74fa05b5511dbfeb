import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContactsRepository } from '../../src/contacts/contacts.repository.js';
import { createDb, CUSTOM_PLAN, FIXED_TEXT, type Db } from '../../src/db/database.js';
import { testDatabaseUrl } from '../database.js';

// One connection, so every statement runs in the session whose prepared statements we read.
let db: Db;
beforeAll(() => {
  db = createDb(testDatabaseUrl(), { max: 1 });
});
afterAll(() => db.destroy());

const prepared = async (fragment: string) =>
  (
    await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`.execute(db)
  ).rows.filter((r) => r.statement.includes(fragment));

describe('named prepared statements', () => {
  it('prepares parametrized statements without *, and only those', async () => {
    await sql`CREATE TEMP TABLE prep_probe (id int, v text)`.execute(db);
    await sql`INSERT INTO prep_probe VALUES (1, 'a')`.execute(db);
    await sql`SELECT id, v FROM prep_probe WHERE id = ${1}`.execute(db);
    await sql`SELECT * FROM prep_probe WHERE id = ${1}`.execute(db);
    await sql`SELECT id FROM prep_probe`.execute(db);
    const rows = await prepared('prep_probe');
    expect(rows.map((r) => r.statement)).toEqual(['SELECT id, v FROM prep_probe WHERE id = $1']);
  });

  it('keeps working when a column is added after statements were prepared', async () => {
    await sql`CREATE TEMP TABLE prep_alter (id int, v text)`.execute(db);
    await sql`INSERT INTO prep_alter VALUES (1, 'a')`.execute(db);
    const before = await sql<{ v: string }>`SELECT id, v FROM prep_alter WHERE id = ${1}`.execute(
      db,
    );
    await sql`ALTER TABLE prep_alter ADD COLUMN w int`.execute(db);
    const explicit = await sql<{ v: string }>`SELECT id, v FROM prep_alter WHERE id = ${1}`.execute(
      db,
    );
    const star = await sql<{ w: number | null }>`SELECT * FROM prep_alter WHERE id = ${1}`.execute(
      db,
    );
    expect(before.rows[0]?.v).toBe('a');
    expect(explicit.rows[0]?.v).toBe('a');
    expect(star.rows[0]?.w).toBeNull();
  });

  it('can be switched off', async () => {
    const plain = createDb(testDatabaseUrl(), { max: 1, preparedStatements: false });
    try {
      await sql`SELECT ${1}::int AS one`.execute(plain);
      const rows = (
        await sql<{ n: string }>`SELECT count(*) AS n FROM pg_prepared_statements`.execute(plain)
      ).rows;
      expect(Number(rows[0]?.n)).toBe(0);
    } finally {
      await plain.destroy();
    }
  });

  it('leaves statements marked CUSTOM_PLAN unprepared, so each is planned for its values', async () => {
    await sql`CREATE TEMP TABLE prep_custom (id int, v text)`.execute(db);
    await sql`SELECT id FROM prep_custom WHERE v = ${'a'} ${CUSTOM_PLAN}`.execute(db);
    expect(await prepared('prep_custom')).toEqual([]);
  });

  it('plans contact searches and tag filters for their values, and prepares the plain list', async () => {
    const contacts = new ContactsRepository(db);
    const accountId = `acc_prep_${Date.now()}`;
    const page = { page: 1, limit: 20 };
    await contacts.list(accountId, { search: 'ada' }, page);
    await contacts.list(accountId, { tag: 'vip' }, page);
    await contacts.list(accountId, {}, page);
    const lists = (await prepared('from "contacts"'))
      .map((r) => r.statement)
      .filter((t) => t.includes('order by'));
    expect(lists).toHaveLength(1);
    expect(lists[0]).not.toMatch(/ilike|tags @>/);
  });

  it('prepares a long statement only when it is marked FIXED_TEXT', async () => {
    await sql`CREATE TEMP TABLE prep_long (id int, v text)`.execute(db);
    // Over 4,000 characters: a long literal stands for a long statement.
    const padding = sql.raw(`AND v <> '${'x'.repeat(4_100)}'`);
    await sql`SELECT id FROM prep_long WHERE v = ${'a'} ${padding}`.execute(db);
    expect(await prepared('prep_long')).toEqual([]);
    await sql`SELECT id, v FROM prep_long WHERE v = ${'a'} ${padding} ${FIXED_TEXT}`.execute(db);
    const rows = await prepared('prep_long');
    expect(rows).toHaveLength(1);
    expect(rows[0]!.statement).toContain('SELECT id, v FROM prep_long');
  });
});
