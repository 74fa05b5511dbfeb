import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { createDb, migrate } from '../src/db/database.js';
import { startEmbeddedPostgres } from '../src/db/embedded/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

/** One database for the run: the machine's PostgreSQL when TEST_DATABASE_URL is set, else an embedded server. */
export default async function setup(project: TestProject) {
  let url = process.env.TEST_DATABASE_URL;
  let dataDir: string | null = null;
  let stopEmbedded = async () => {};
  if (!url) {
    dataDir = await mkdtemp(path.join(tmpdir(), 'switchboard-test-'));
    await chmod(dataDir, 0o755); // the embedded server may run as the postgres user
    const embedded = await startEmbeddedPostgres({ dataDir });
    url = embedded.url;
    stopEmbedded = () => embedded.stop();
  }
  const db = createDb(url);
  await migrate(db);
  await db.destroy();
  project.provide('databaseUrl', url);
  process.stdout.write(
    `[tests] database: ${process.env.TEST_DATABASE_URL ? 'TEST_DATABASE_URL' : 'embedded PostgreSQL'}\n`,
  );
  return async () => {
    await stopEmbedded();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  };
}
