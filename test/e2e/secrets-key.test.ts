import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { createDb } from '../../src/db/database.js';
import { createPrivateDatabase } from '../helpers.js';
import { runCli } from './process.js';

const MISSING =
  'switchboard: configuration error: SECRETS_KEY is required with DATABASE_URL: webhook and connection secrets are stored encrypted under it (make one with openssl rand -base64 32, and keep it)\n';

it(
  'with DATABASE_URL and no SECRETS_KEY, every command that opens the store stops with one clear line and touches nothing',
  { timeout: 120_000 },
  async () => {
    const bare = await createPrivateDatabase({ migrated: false });
    try {
      for (const args of [['serve'], ['worker'], ['migrate'], ['accounts', 'list']]) {
        const res = await runCli({ DATABASE_URL: bare.url, SECRETS_KEY: '', PORT: '0' }, args);
        expect(res.code, args.join(' ')).toBe(1);
        expect(res.stderr, args.join(' ')).toBe(MISSING);
        expect(res.stdout, args.join(' ')).toBe('');
      }
      const db = createDb(bare.url, { max: 1 });
      try {
        const { rows } = await sql<{ n: string }>`
          SELECT count(*)::text AS n FROM pg_tables WHERE schemaname = 'public'`.execute(db);
        expect(rows[0]!.n).toBe('0');
      } finally {
        await db.destroy();
      }
    } finally {
      await bare.drop();
    }
  },
);
