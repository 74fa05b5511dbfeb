import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { runProgram, type Cluster } from './pg-ctl.js';
import { ensureOwnedBy, SUPERUSER } from './run-as.js';
import { errMessage, errnoCode, readIfExists } from './util.js';

// The cluster's files: its superuser's credentials, the cluster itself (initdb), and the
// application's database in it.

export interface Credentials {
  user: string;
  password: string;
}

export async function loadOrCreateCredentials(dataDir: string): Promise<Credentials> {
  const file = path.join(dataDir, 'pg-credentials.json');
  const raw = await readIfExists(file);
  if (raw !== undefined) {
    const parsed: unknown = JSON.parse(raw);
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      'user' in parsed &&
      typeof parsed.user === 'string' &&
      'password' in parsed &&
      typeof parsed.password === 'string'
    ) {
      return { user: parsed.user, password: parsed.password };
    }
    throw new Error(`${file} is not valid: expected { "user": string, "password": string }`);
  }
  const credentials: Credentials = {
    user: SUPERUSER,
    password: randomBytes(24).toString('base64url'),
  };
  // Written before initdb and atomically: a cluster whose password was lost is unusable.
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 });
  await fs.rename(tmp, file);
  return credentials;
}

export async function initClusterIfMissing(
  cluster: Cluster,
  dataDir: string,
  credentials: Credentials,
): Promise<void> {
  const { pgDir, runAs } = cluster;
  if ((await readIfExists(path.join(pgDir, 'PG_VERSION'))) !== undefined) return;

  // initdb writes PG_VERSION before it finishes, so a cluster interrupted mid-initdb would
  // look complete. Building it aside and renaming makes <dataDir>/pg appear only when whole.
  const existing = await fs.readdir(pgDir).catch(() => undefined);
  if (existing !== undefined) {
    if (existing.length > 0) {
      throw new Error(
        `${pgDir} exists but holds no PostgreSQL cluster (no PG_VERSION); move it away`,
      );
    }
    await fs.rmdir(pgDir);
  }
  const buildDir = path.join(dataDir, 'pg.initdb');
  await fs.rm(buildDir, { recursive: true, force: true });
  await fs.mkdir(buildDir, { mode: 0o700 });
  await ensureOwnedBy(buildDir, runAs);

  const pwFile = path.join(dataDir, 'pg-initdb-password');
  await fs.writeFile(pwFile, credentials.password + '\n', { mode: 0o600 });
  await ensureOwnedBy(pwFile, runAs);
  try {
    await runProgram(
      cluster.bin.initdb,
      [
        `--pgdata=${buildDir}`,
        '--auth=scram-sha-256',
        `--username=${credentials.user}`,
        `--pwfile=${pwFile}`,
        '--encoding=UTF8',
        // Code-point order (as C), but Unicode letters: lower() and the text search lower-case
        // 'Élodie' as they do 'Ada', so a search ignores case beyond ASCII too (PostgreSQL 17+).
        '--locale=C',
        '--locale-provider=builtin',
        '--builtin-locale=C.UTF-8',
        '--no-instructions',
      ],
      runAs,
    ).catch((err: unknown) => {
      throw new Error(`${errMessage(err)}${cluster.hint}`, { cause: err });
    });
  } finally {
    await fs.rm(pwFile, { force: true });
  }
  await fs.rename(buildDir, pgDir);
}

/** Creates the application's database unless it exists; checks the credentials on the way. */
export async function ensureDatabase(
  port: number,
  credentials: Credentials,
  database: string,
): Promise<void> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: credentials.user,
    password: credentials.password,
    database: 'postgres',
    connectionTimeoutMillis: 10_000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    const code = errnoCode(err);
    // 28P01/28000: wrong password or no such role; the credentials file does not match the cluster.
    if (code === '28P01' || code === '28000') {
      throw new Error(
        `PostgreSQL rejected the credentials in pg-credentials.json: ${errMessage(err)}`,
        { cause: err },
      );
    }
    throw err;
  }
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
      } catch (err) {
        if (errnoCode(err) !== '42P04') throw err; // created concurrently: fine
      }
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}
