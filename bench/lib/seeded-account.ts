import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { BenchContext } from './suite.js';

/**
 * An account of the database bench/inbox/seed.ts filled, found by name, with an API key made
 * for this run (stored as the service stores keys: the SHA-256 only) and removed when the
 * suite ends. Reads only otherwise: the seeded rows stay as they are.
 */
export async function seededAccount(
  ctx: BenchContext,
  pool: pg.Pool,
  name: string,
  keyName: string,
): Promise<{ accountId: string; apiKey: string }> {
  const found = await pool.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [name]);
  const accountId = found.rows[0]?.id;
  if (accountId === undefined) {
    throw new Error(
      `no account "${name}" in ${ctx.service.database}: seed it first (npx tsx bench/inbox/seed.ts)`,
    );
  }
  const apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
  const keyId = `key_bench_${randomBytes(8).toString('hex')}`;
  await pool.query(
    `INSERT INTO api_keys (account_id, id, name, key_hash, created_at) VALUES ($1, $2, $3, $4, now())`,
    [accountId, keyId, keyName, createHash('sha256').update(apiKey).digest('hex')],
  );
  ctx.defer(async () => {
    await pool.query('DELETE FROM api_keys WHERE account_id = $1 AND id = $2', [accountId, keyId]);
  });
  return { accountId, apiKey };
}

/**
 * False, with a line saying how to seed and run it, when a suite that reads a seeded database
 * runs without BENCH_DATABASE_URL: not a failure, so that a run of every suite on the embedded
 * store goes on without it.
 */
export function hasSeededDatabase(ctx: BenchContext, seed: 'inbox' | 'contacts', suite: string) {
  if (ctx.settings.databaseUrl !== null) return true;
  ctx.log(
    `skipped: the ${suite} suite reads a seeded database. Run "npx tsx bench/${seed}/seed.ts" ` +
      `once, then BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_${seed} ` +
      `npx tsx bench/run.ts ${suite}`,
  );
  return false;
}
