import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { TestProject } from 'vitest/node';
import { createDb, migrate } from '../src/db/database.js';
import { startEmbeddedPostgres } from '../src/db/embedded/index.js';
import { sealForTests } from './secrets-key.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** One database per test worker (see test/database.ts): the first is the run's own. */
    databaseUrls: string[];
  }
}

/** The database of the test worker `n` (1-based): the run's own for the first, a sibling after. */
function workerUrl(base: string, n: number): string {
  if (n === 1) return base;
  const url = new URL(base);
  url.pathname = `/${url.pathname.slice(1) || 'postgres'}_w${n}`;
  return url.toString();
}

async function onServer(base: string, statement: ReturnType<typeof sql>): Promise<void> {
  const admin = createDb(base, { max: 1, preparedStatements: false });
  try {
    await statement.execute(admin);
  } finally {
    await admin.destroy();
  }
}

/**
 * The run's databases: on the machine's PostgreSQL when TEST_DATABASE_URL is set, else on an
 * embedded server. Each test worker gets a database of its own, so that files running at the same
 * time never share background work (job runners claim every account's jobs in their database);
 * within a worker, files run one after another as they always did.
 */
export default async function setup(project: TestProject) {
  let base = process.env.TEST_DATABASE_URL;
  let dataDir: string | null = null;
  let stopEmbedded = async () => {};
  if (!base) {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-test-'));
    await chmod(dataDir, 0o755); // the embedded server may run as the postgres user
    const embedded = await startEmbeddedPostgres({ dataDir });
    base = embedded.url;
    stopEmbedded = () => embedded.stop();
  }
  const workers = Math.max(1, Number(project.config.maxWorkers) || 1);
  const urls = Array.from({ length: workers }, (_, i) => workerUrl(base, i + 1));
  const extra = urls.slice(1).map((u) => new URL(u).pathname.slice(1));
  for (const name of extra) {
    await onServer(base, sql`DROP DATABASE IF EXISTS ${sql.id(name)} WITH (FORCE)`);
    await onServer(base, sql`CREATE DATABASE ${sql.id(name)}`);
  }
  await Promise.all(
    urls.map(async (url) => {
      const db = createDb(url);
      try {
        // A run's own database keeps what earlier runs stored, under the tests' key.
        await migrate(db, sealForTests);
      } finally {
        await db.destroy();
      }
    }),
  );
  project.provide('databaseUrls', urls);
  process.stdout.write(
    `[tests] database: ${process.env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : 'embedded PostgreSQL'}, ${workers} worker(s)\n`,
  );
  return async () => {
    if (process.env.TEST_DATABASE_URL) {
      for (const name of extra) {
        await onServer(base, sql`DROP DATABASE IF EXISTS ${sql.id(name)} WITH (FORCE)`);
      }
    }
    await stopEmbedded();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  };
}
