// What the seeding commands share (bench/inbox/seed.ts, bench/contacts/seed.ts): a database made
// afresh and migrated by the built service, rows streamed in with COPY while the tables' keys and
// indexes are away, and those built again after.

import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { benchSecretsKey } from './settings.js';

const ROWS_PER_CHUNK = 2_000;

/**
 * Creates the database of `url` afresh on its server; one that exists is dropped first with
 * `replace`, or kept (false). Refuses names that are not plainly a seed's own.
 */
export async function createDatabase(url: URL, replace: boolean): Promise<boolean> {
  const database = decodeURIComponent(url.pathname.slice(1));
  if (!/^[a-z_][a-z0-9_]*$/.test(database)) throw new Error(`unusable database name "${database}"`);
  if (database === 'test' || database === 'postgres')
    throw new Error(`refusing to seed the database "${database}": name one of your own`);
  const admin = new pg.Client({
    connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString(),
  });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount !== 0) {
      if (!replace) return false;
      await admin.query(`DROP DATABASE ${database} WITH (FORCE)`);
    }
    await admin.query(`CREATE DATABASE ${database}`);
    return true;
  } finally {
    await admin.end();
  }
}

/** `node dist/cli.js migrate` on the new database: the schema exactly as the service makes it. */
export async function migrateWithCli(cli: string, databaseUrl: string): Promise<void> {
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    SECRETS_KEY: benchSecretsKey(),
    LOG_LEVEL: 'warn',
  };
  const child = spawn(process.execPath, [cli, 'migrate'], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout.resume();
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`node dist/cli.js migrate exited with ${code}`);
}

/** One COPY text-format field. */
export function field(value: string | number | null): string {
  if (value === null) return '\\N';
  if (typeof value === 'number') return String(value);
  return value.replace(/[\\\t\n\r]/g, (c) =>
    c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r',
  );
}

export const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
export const row = (values: Array<string | number | null>) => `${values.map(field).join('\t')}\n`;

/** Streams `rows` (generated lazily, joined into chunks) into `table (columns)` with COPY. */
export async function copy(
  pool: pg.Pool,
  table: string,
  columns: string[],
  rows: () => Generator<string>,
): Promise<number> {
  const client = await pool.connect();
  let count = 0;
  try {
    function* chunks(): Generator<string> {
      let chunk = '';
      let inChunk = 0;
      for (const line of rows()) {
        chunk += line;
        count++;
        if (++inChunk === ROWS_PER_CHUNK) {
          yield chunk;
          chunk = '';
          inChunk = 0;
        }
      }
      if (chunk !== '') yield chunk;
    }
    await pipeline(
      Readable.from(chunks(), { objectMode: false }),
      client.query(copyFrom(`COPY ${table} (${columns.join(', ')}) FROM STDIN`)),
    );
  } finally {
    client.release();
  }
  return count;
}

export interface DroppedKey {
  table: string;
  name: string;
  /** ALTER TABLE … ADD CONSTRAINT or CREATE INDEX, as PostgreSQL itself prints it. */
  definition: string;
  kind: 'primary' | 'index' | 'foreign';
}

/**
 * Drops these tables' keys and indexes (CHECK constraints stay), and the foreign keys that
 * reference them, keeping their definitions.
 */
export async function dropKeys(pool: pg.Pool, tables: readonly string[]): Promise<DroppedKey[]> {
  const constraints = await pool.query<{ table: string; name: string; def: string; type: string }>(
    `SELECT conrelid::regclass::text AS table, conname AS name, pg_get_constraintdef(oid) AS def, contype AS type
     FROM pg_constraint
     WHERE (conrelid = ANY($1::regclass[]) AND contype IN ('p', 'u', 'f', 'x'))
        -- Other tables' foreign keys on these, which hold their keys in place.
        OR (confrelid = ANY($1::regclass[]) AND contype = 'f')`,
    [tables],
  );
  const indexes = await pool.query<{ table: string; name: string; def: string }>(
    `SELECT i.indrelid::regclass::text AS table, c.relname AS name, pg_get_indexdef(i.indexrelid) AS def
     FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = ANY($1::regclass[])
       AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x'))`,
    [tables],
  );
  const dropped: DroppedKey[] = [
    ...constraints.rows.map((r) => ({
      table: r.table,
      name: r.name,
      definition: `ALTER TABLE ${r.table} ADD CONSTRAINT ${r.name} ${r.def}`,
      kind: r.type === 'f' ? ('foreign' as const) : ('primary' as const),
    })),
    ...indexes.rows.map((r) => ({
      table: r.table,
      name: r.name,
      definition: r.def,
      kind: 'index' as const,
    })),
  ];
  // Foreign keys first (they depend on the keys they reference).
  for (const d of dropped.filter((d) => d.kind === 'foreign'))
    await pool.query(`ALTER TABLE ${d.table} DROP CONSTRAINT ${d.name}`);
  for (const d of dropped.filter((d) => d.kind === 'primary'))
    await pool.query(`ALTER TABLE ${d.table} DROP CONSTRAINT ${d.name}`);
  for (const d of dropped.filter((d) => d.kind === 'index'))
    await pool.query(`DROP INDEX ${d.name}`);
  return dropped;
}

/** Builds them again: keys, then indexes (two at a time), then foreign keys. */
export async function restoreKeys(
  pool: pg.Pool,
  dropped: DroppedKey[],
  log: (line: string) => void,
): Promise<void> {
  const build = async (d: DroppedKey) => {
    const client = await pool.connect();
    try {
      await client.query(`SET maintenance_work_mem = '1GB'`);
      const since = performance.now();
      await client.query(d.definition);
      log(`  ${d.name}: ${((performance.now() - since) / 1000).toFixed(1)} s`);
    } finally {
      client.release();
    }
  };
  const inTwos = async (list: DroppedKey[]) => {
    const queue = [...list];
    await Promise.all(
      [0, 1].map(async () => {
        for (let d = queue.shift(); d; d = queue.shift()) await build(d);
      }),
    );
  };
  await inTwos(dropped.filter((d) => d.kind === 'primary'));
  await inTwos(dropped.filter((d) => d.kind === 'index'));
  for (const d of dropped.filter((d) => d.kind === 'foreign')) await build(d);
}
