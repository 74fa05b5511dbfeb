import { Kysely, Migrator, PostgresDialect, type Transaction, type Migration } from 'kysely';
import pg from 'pg';
import type { Tables } from './schema.js';
import * as m001 from './migrations/001_foundation.js';
import * as m002 from './migrations/002_inbox.js';
import * as m003 from './migrations/003_webhooks.js';
import * as m004 from './migrations/004_broadcasts.js';

export type Db = Kysely<Tables>;
export type Tx = Transaction<Tables>;

// bigint columns (event seq, counts) come back as strings; counts we read are small.
pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => value);

export function createDb(url: string, opts: { max?: number } = {}): Db {
  const pool = new pg.Pool({ connectionString: url, max: opts.max ?? 20 });
  // An idle client that loses its server must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  return new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) });
}

const migrations: Record<string, Migration> = {
  '001_foundation': m001,
  '002_inbox': m002,
  '003_webhooks': m003,
  '004_broadcasts': m004,
};

/** Applies pending migrations; Kysely's migrator takes a lock, so concurrent starts are safe. */
export async function migrate(db: Db): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '?'} failed: ${error instanceof Error ? error.message : JSON.stringify(error)}`, {
      cause: error,
    });
  }
}
