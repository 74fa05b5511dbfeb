/**
 * Seeds the contacts benchmark's database (`npx tsx bench/contacts/seed.ts --help`): one account
 * of 1,000,000 contacts (names, phones, emails, 1 to 5 tags of 50 and one all of them hold, custom
 * fields, lifecycle stages), beside one of 10,000 and 98 of 1,000, written with COPY into a database migrated by
 * the built service (`node dist/cli.js migrate`). The rows are those the API writes
 * (bench/contacts/data.ts); the contact counters of migration 034 are kept by their triggers as
 * the rows arrive, the indexes built after.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ulidId } from '../inbox/data.js';
import {
  copy,
  createDatabase,
  dropKeys,
  iso,
  migrateWithCli,
  restoreKeys,
  row,
} from '../lib/copy-seed.js';
import {
  AUDIENCE_TAG,
  BIG_COUNT,
  BIG_NAME,
  MEDIUM_COUNT,
  MEDIUM_NAME,
  OTHER_ACCOUNTS,
  SMALL_COUNT,
  SMALL_PREFIX,
  TAGS,
  contactOf,
} from './data.js';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/bench_contacts';

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

interface Account {
  index: number;
  id: string;
  name: string;
  count: number;
}

async function run(args: string[]): Promise<number> {
  if (args.includes('-h') || args.includes('--help')) {
    log(
      [
        'usage: npx tsx bench/contacts/seed.ts [--replace]   (after npm run build)',
        '',
        `Creates the database of BENCH_DATABASE_URL (default ${DEFAULT_URL}), migrates it with`,
        'node dist/cli.js migrate and fills it with COPY: an account of 1,000,000 contacts, one of',
        '10,000 and 98 of 1,000. An existing database is kept unless --replace is given.',
      ].join('\n'),
    );
    return 0;
  }
  const url = new URL(process.env.BENCH_DATABASE_URL || DEFAULT_URL);
  const cli = path.join(projectRoot, 'dist', 'cli.js');
  if (!existsSync(cli)) throw new Error(`${cli} not found: run "npm run build" first`);
  const started = performance.now();
  const phase = (what: string, since: number) =>
    log(`${what}: ${((performance.now() - since) / 1000).toFixed(1)} s`);
  if (!(await createDatabase(url, args.includes('--replace')))) {
    log(`database ${url.pathname.slice(1)} exists; keeping it (pass --replace to seed it again)`);
    return 1;
  }
  let since = performance.now();
  await migrateWithCli(cli, url.toString());
  phase('migrations (node dist/cli.js migrate)', since);

  const now = Date.now();
  const created = new Date(now - 3 * 365 * 86_400_000);
  const accounts: Account[] = [
    { index: 0, name: BIG_NAME, count: BIG_COUNT },
    { index: 1, name: MEDIUM_NAME, count: MEDIUM_COUNT },
    ...Array.from({ length: OTHER_ACCOUNTS - 1 }, (_, k) => ({
      index: k + 2,
      name: `${SMALL_PREFIX} ${String(k + 1).padStart(2, '0')}`,
      count: SMALL_COUNT,
    })),
  ].map((a) => ({ ...a, id: ulidId('acc', created.getTime(), 7_000 + a.index) }));

  const pool = new pg.Pool({ connectionString: url.toString(), max: 4 });
  pool.on('error', () => undefined);
  try {
    since = performance.now();
    for (const a of accounts) {
      await pool.query(
        `INSERT INTO accounts (id, name, plan, rate_limit_per_minute, created_at, updated_at)
         VALUES ($1, $2, 'enterprise', 1000000, $3, $3)`,
        [a.id, a.name, created],
      );
      await pool.query(
        `INSERT INTO tags (account_id, name, created_at) SELECT $1, unnest($2::text[]), $3`,
        [a.id, a.index === 0 ? [...TAGS, AUDIENCE_TAG] : TAGS, created],
      );
    }
    // A key as the service issues one: only its SHA-256 is kept.
    const apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
    await pool.query(
      `INSERT INTO api_keys (account_id, id, name, key_hash, created_at) VALUES ($1, $2, 'bench contacts seed', $3, now())`,
      [
        accounts[0]!.id,
        ulidId('key', now, 7_000, 6),
        createHash('sha256').update(apiKey).digest('hex'),
      ],
    );
    phase(`${accounts.length} accounts, their tags, an API key`, since);

    since = performance.now();
    const dropped = await dropKeys(pool, ['contacts']);
    phase(`dropped ${dropped.length} indexes and keys of contacts`, since);

    since = performance.now();
    const columns = [
      'account_id',
      'id',
      'phone',
      'name',
      'email',
      'tags',
      'lifecycle_stage',
      'custom_fields',
      'created_at',
      'updated_at',
    ];
    // Two COPY streams at once: the big account, and every other one.
    const written = await Promise.all(
      [accounts.slice(0, 1), accounts.slice(1)].map((group) =>
        copy(pool, 'contacts', columns, function* () {
          for (const a of group) {
            for (let i = 0; i < a.count; i++) {
              const c = contactOf(a.index, a.count, i, now);
              yield row([
                a.id,
                c.id,
                c.phone,
                c.name,
                c.email,
                `{${c.tags.join(',')}}`,
                c.lifecycleStage,
                JSON.stringify(c.customFields),
                iso(c.createdAt),
                iso(c.createdAt),
              ]);
            }
          }
        }),
      ),
    );
    phase(`COPY: ${(written[0]! + written[1]!).toLocaleString('en-US')} contacts`, since);

    since = performance.now();
    await restoreKeys(pool, dropped, log);
    phase('indexes and keys built again', since);
    since = performance.now();
    await pool.query('VACUUM (ANALYZE) contacts, contact_counts, contact_tag_counts');
    phase('VACUUM (ANALYZE)', since);

    const size = await pool.query<{ size: string }>(
      `SELECT pg_size_pretty(pg_total_relation_size('contacts')) AS size`,
    );
    log(`contacts with indexes: ${size.rows[0]?.size}`);
    log(`seeded in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    log(`big account ${accounts[0]!.id} ("${BIG_NAME}"), API key (printed once):`);
    log(apiKey);
    return 0;
  } finally {
    await pool.end();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `seed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
