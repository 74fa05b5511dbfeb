import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrivateDatabase, startTestApp, type TestApp } from '../helpers.js';

// The first start of an empty store creates the "Default" account and prints its key once.
let database: { url: string; drop: () => Promise<void> };
let apps: TestApp[] = [];

beforeAll(async () => {
  database = await createPrivateDatabase();
  apps = await Promise.all(
    [1, 2, 3, 4].map(() => startTestApp({ databaseUrl: database.url, readCache: false })),
  );
});

afterAll(async () => {
  await Promise.all(apps.map((a) => a.close()));
  await database.drop();
});

describe('the Default account of an empty store', () => {
  it('is created once, with its key, when several processes start together', async () => {
    const results = await Promise.all(
      apps.map((a) => a.services.accounts.bootstrapDefaultAccount()),
    );
    const created = results.filter((r) => r !== null);
    expect(created).toHaveLength(1);
    expect(created[0]!.account).toMatchObject({ name: 'Default', plan: 'growth' });

    const db = apps[0]!.db;
    const accounts = await sql<{ n: string }>`SELECT count(*) AS n FROM accounts`.execute(db);
    const keys = await sql<{ n: string }>`SELECT count(*) AS n FROM api_keys`.execute(db);
    expect(Number(accounts.rows[0]!.n)).toBe(1);
    expect(Number(keys.rows[0]!.n)).toBe(1);

    // The printed key works.
    const res = await apps[1]!.app.inject({
      method: 'GET',
      url: '/v1/contacts',
      headers: { authorization: `Bearer ${created[0]!.key.api_key}` },
    });
    expect(res.statusCode).toBe(200);

    // Later starts print nothing.
    expect(await apps[2]!.services.accounts.bootstrapDefaultAccount()).toBeNull();
  });
});
