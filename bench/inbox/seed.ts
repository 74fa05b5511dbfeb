/**
 * Seeds the inbox benchmark's database (`npx tsx bench/inbox/seed.ts --help`): one account of
 * 1,000,000 contacts, 1,000,000 conversations (100,000 open) and 10,000,000 messages (one
 * conversation of 100,000), beside 99 accounts of 1,000 conversations, written with COPY into a
 * database migrated by the built service (`node dist/cli.js migrate`). Prints an API key of the
 * big account. The rows are those the service writes (bench/inbox/data.ts), derived ones
 * included: each contact's identity on Messenger, Instagram or webchat (and its webchat
 * visitor), tags, the conversations' last_inbound_at / last_read_at, users, teams, a template.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { benchSecretsKey } from '../lib/settings.js';
import {
  BIG,
  BIG_ACCOUNT_NAME,
  SMALL_ACCOUNT_PREFIX,
  TAG_NAMES,
  TEMPLATE_BODY,
  TEMPLATE_NAME,
  accountIdOf,
  conversationPlan,
  messageCounts,
  messagePlan,
  smallShape,
  teamIdOf,
  timesOf,
  ulidId,
  userIdOf,
  userNameOf,
  type AccountShape,
  type AccountTimes,
  type ConversationPlan,
} from './data.js';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/bench_inbox';
const SMALL_ACCOUNTS = 99;
// The tables COPY fills, whose indexes and keys are dropped first and built again after.
const LOADED = ['contacts', 'contact_identities', 'webchat_visitors', 'conversations', 'messages'];
const ROWS_PER_CHUNK = 2_000;

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function usage(): string {
  return [
    'usage: npx tsx bench/inbox/seed.ts [--replace]   (after npm run build)',
    '',
    `Creates the database of BENCH_DATABASE_URL (default ${DEFAULT_URL}), migrates it with`,
    'node dist/cli.js migrate, fills it with COPY and prints an API key of the big account.',
    'An existing database is left alone unless --replace is given (it is then dropped first).',
    '--scale=N divides the big account by N (a quick try: --scale=100).',
  ].join('\n');
}

/** One COPY text-format field. */
function field(value: string | number | null): string {
  if (value === null) return '\\N';
  if (typeof value === 'number') return String(value);
  return value.replace(/[\\\t\n\r]/g, (c) =>
    c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r',
  );
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const row = (values: Array<string | number | null>) => `${values.map(field).join('\t')}\n`;

/** Streams `rows` (generated lazily, joined into chunks) into `table (columns)` with COPY. */
async function copy(
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

interface Seeded {
  shape: AccountShape;
  accountId: string;
  counts: Uint32Array;
}

function* eachConversation(
  seeded: Seeded[],
  t: AccountTimes,
): Generator<[Seeded, ConversationPlan]> {
  for (const s of seeded) {
    for (let i = 0; i < s.shape.contacts; i++) yield [s, conversationPlan(s.shape, t, s.counts, i)];
  }
}

async function run(args: string[]): Promise<number> {
  if (args.includes('-h') || args.includes('--help')) {
    log(usage());
    return 0;
  }
  const replace = args.includes('--replace');
  const scaleArg = args.find((a) => a.startsWith('--scale='));
  const scale = scaleArg === undefined ? 1 : Number(scaleArg.slice('--scale='.length));
  if (!Number.isInteger(scale) || scale < 1 || scale > 1000)
    throw new Error('--scale takes 1 to 1000');
  const url = new URL(process.env.BENCH_DATABASE_URL || DEFAULT_URL);
  const database = decodeURIComponent(url.pathname.slice(1));
  if (!/^[a-z_][a-z0-9_]*$/.test(database)) throw new Error(`unusable database name "${database}"`);
  if (database === 'test' || database === 'postgres')
    throw new Error(`refusing to seed the database "${database}": name one of your own`);
  const cli = path.join(projectRoot, 'dist', 'cli.js');
  if (!existsSync(cli)) throw new Error(`${cli} not found: run "npm run build" first`);

  const started = performance.now();
  const phase = (what: string, since: number) =>
    log(`${what}: ${((performance.now() - since) / 1000).toFixed(1)} s`);

  // The database, created afresh.
  const admin = new pg.Client({
    connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString(),
  });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount !== 0) {
      if (!replace) {
        log(`database ${database} exists; keeping it (pass --replace to seed it again)`);
        return 1;
      }
      await admin.query(`DROP DATABASE ${database} WITH (FORCE)`);
    }
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }

  let since = performance.now();
  await migrate(cli, url.toString());
  phase('migrations (node dist/cli.js migrate)', since);

  const pool = new pg.Pool({ connectionString: url.toString(), max: 6 });
  pool.on('error', () => undefined);
  try {
    const t = timesOf(Date.now());
    const big = scaled(BIG, scale);
    const shapes = [big, ...Array.from({ length: SMALL_ACCOUNTS }, (_, k) => smallShape(k + 1))];
    const seeded: Seeded[] = shapes.map((shape) => ({
      shape,
      accountId: accountIdOf(shape, t),
      counts: messageCounts(shape),
    }));

    since = performance.now();
    const apiKey = await insertAccounts(pool, seeded, t);
    phase('accounts, users, teams, templates, tags, API key', since);

    since = performance.now();
    const dropped = await dropKeys(pool);
    phase(`dropped ${dropped.length} indexes and keys of ${LOADED.join(', ')}`, since);

    since = performance.now();
    const written = await Promise.all([
      copy(
        pool,
        'contacts',
        [
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
        ],
        function* () {
          for (const [s, c] of eachConversation(seeded, t)) {
            yield row([
              s.accountId,
              c.contactId,
              c.phone,
              c.name,
              c.email,
              `{${c.tags.join(',')}}`,
              c.lifecycleStage,
              '{}',
              iso(c.contactCreatedAt),
              iso(c.contactCreatedAt),
            ]);
          }
        },
      ),
      copy(
        pool,
        'contact_identities',
        ['account_id', 'contact_id', 'channel', 'external_id', 'created_at'],
        function* () {
          for (const [s, c] of eachConversation(seeded, t)) {
            if (c.externalId === null) continue;
            yield row([s.accountId, c.contactId, c.channel, c.externalId, iso(c.contactCreatedAt)]);
          }
        },
      ),
      copy(
        pool,
        'webchat_visitors',
        ['account_id', 'id', 'identifier', 'created_at', 'updated_at'],
        function* () {
          for (const [s, c] of eachConversation(seeded, t)) {
            if (c.channel !== 'webchat') continue;
            yield row([
              s.accountId,
              ulidId('vis', c.contactCreatedAt, s.shape.index * 2_000_000 + c.i, 5),
              c.externalId,
              iso(c.contactCreatedAt),
              iso(c.updatedAt),
            ]);
          }
        },
      ),
      copy(
        pool,
        'conversations',
        [
          'account_id',
          'id',
          'contact_id',
          'channel',
          'status',
          'assignee_type',
          'assignee_id',
          'last_inbound_at',
          'last_read_at',
          'created_at',
          'updated_at',
        ],
        function* () {
          for (const [s, c] of eachConversation(seeded, t)) {
            yield row([
              s.accountId,
              c.conversationId,
              c.contactId,
              c.channel,
              c.status,
              c.assignee?.type ?? null,
              c.assignee?.id ?? null,
              iso(c.lastInboundAt),
              iso(c.lastReadAt),
              iso(c.createdAt),
              iso(c.updatedAt),
            ]);
          }
        },
      ),
      copy(
        pool,
        'messages',
        [
          'account_id',
          'id',
          'conversation_id',
          'direction',
          'type',
          'content',
          'media_url',
          'template_name',
          'template_language',
          'template_params',
          'status',
          'failure_reason',
          'provider_message_id',
          'created_at',
          'updated_at',
        ],
        function* () {
          for (const [s, c] of eachConversation(seeded, t)) {
            for (let k = 0; k < c.messages; k++) {
              const m = messagePlan(s.shape, t, c, k);
              const at = iso(m.at);
              const template = m.type === 'template';
              yield row([
                s.accountId,
                m.id,
                c.conversationId,
                m.direction,
                m.type,
                m.content,
                m.mediaUrl,
                template ? TEMPLATE_NAME : null,
                template ? 'en' : null,
                m.templateParams,
                m.status,
                m.failureReason,
                m.providerMessageId,
                at,
                // Statuses arrive after the send: a read message's row last changed later.
                m.direction === 'outbound' && m.status !== 'sent'
                  ? iso(Math.min(t.now, m.at + 5_000))
                  : at,
              ]);
            }
          }
        },
      ),
    ]);
    phase(
      `COPY: ${written.map((n) => n.toLocaleString('en-US')).join(' / ')} rows of ` +
        'contacts / contact_identities / webchat_visitors / conversations / messages',
      since,
    );

    since = performance.now();
    await restoreKeys(pool, dropped);
    phase('indexes and keys built again', since);

    since = performance.now();
    await pool.query(`VACUUM (ANALYZE) ${LOADED.join(', ')}`);
    phase('VACUUM (ANALYZE)', since);

    const sizes = await pool.query<{ name: string; size: string }>(
      `SELECT relname AS name, pg_size_pretty(pg_total_relation_size(oid)) AS size
       FROM pg_class WHERE relname = ANY($1::text[]) ORDER BY relname`,
      [LOADED],
    );
    const db = await pool.query<{ size: string }>(
      'SELECT pg_size_pretty(pg_database_size(current_database())) AS size',
    );
    log(
      `sizes (with indexes): ${sizes.rows.map((r) => `${r.name} ${r.size}`).join(', ')}; database ${db.rows[0]?.size}`,
    );
    log(`seeded in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    log(`big account ${seeded[0]!.accountId} ("${BIG_ACCOUNT_NAME}"), API key (printed once):`);
    log(apiKey);
    return 0;
  } finally {
    await pool.end();
  }
}

/** The big account divided by `n` (the small ones stay as they are). */
function scaled(shape: AccountShape, n: number): AccountShape {
  if (n === 1) return shape;
  const long = Math.floor(shape.longMessages / n);
  return {
    ...shape,
    contacts: Math.floor(shape.contacts / n),
    open: Math.floor(shape.open / n),
    messages: Math.floor((shape.messages + shape.longMessages) / n) - long,
    longMessages: long,
  };
}

/** `node dist/cli.js migrate` on the new database: the schema exactly as the service makes it. */
async function migrate(cli: string, databaseUrl: string): Promise<void> {
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

/** Accounts, their users, teams, template and tags, and one API key of the big account. */
async function insertAccounts(pool: pg.Pool, seeded: Seeded[], t: AccountTimes): Promise<string> {
  const created = new Date(t.createdAt);
  for (const { shape, accountId } of seeded) {
    const big = shape.index === 0;
    await pool.query(
      `INSERT INTO accounts (id, name, plan, rate_limit_per_minute, created_at, updated_at)
       VALUES ($1, $2, 'enterprise', 1000000, $3, $3)`,
      [
        accountId,
        big ? BIG_ACCOUNT_NAME : `${SMALL_ACCOUNT_PREFIX} ${String(shape.index).padStart(2, '0')}`,
        created,
      ],
    );
    const users = Array.from({ length: shape.users }, (_, u) => u);
    await pool.query(
      `INSERT INTO users (account_id, id, name, email, created_at)
       SELECT $1, u.id, u.name, u.email, $2 FROM unnest($3::text[], $4::text[], $5::text[]) AS u(id, name, email)`,
      [
        accountId,
        created,
        users.map((u) => userIdOf(shape, t, u)),
        users.map((u) => userNameOf(shape, u)),
        users.map((u) => `agent${u}@acme-${shape.index}.example.com`),
      ],
    );
    const teams = Array.from({ length: shape.teams }, (_, n) => n);
    await pool.query(
      `INSERT INTO teams (account_id, id, name, user_ids, created_at)
       SELECT $1, tm.id, tm.name, tm.user_ids::text[], $2
       FROM unnest($3::text[], $4::text[], $5::text[]) AS tm(id, name, user_ids)`,
      [
        accountId,
        created,
        teams.map((n) => teamIdOf(shape, t, n)),
        teams.map((n) => `Team ${n + 1}`),
        // Each user in one team, round robin, as a literal array per team.
        teams.map(
          (n) =>
            `{${users
              .filter((u) => u % shape.teams === n)
              .map((u) => userIdOf(shape, t, u))
              .join(',')}}`,
        ),
      ],
    );
    await pool.query(
      `INSERT INTO templates (account_id, id, name, language, category, body, status, created_at, updated_at)
       VALUES ($1, $2, $3, 'en', 'utility', $4, 'approved', $5, $5)`,
      [
        accountId,
        ulidId('tpl', t.createdAt, shape.index, 4),
        TEMPLATE_NAME,
        TEMPLATE_BODY,
        created,
      ],
    );
    await pool.query(
      `INSERT INTO tags (account_id, name, created_at) SELECT $1, unnest($2::text[]), $3`,
      [accountId, TAG_NAMES, created],
    );
  }
  // A key as the service issues one: only its SHA-256 is kept.
  const apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
  await pool.query(
    `INSERT INTO api_keys (account_id, id, name, key_hash, created_at) VALUES ($1, $2, 'bench inbox seed', $3, now())`,
    [
      seeded[0]!.accountId,
      ulidId('key', Date.now(), 0, 6),
      createHash('sha256').update(apiKey).digest('hex'),
    ],
  );
  return apiKey;
}

interface DroppedKey {
  table: string;
  name: string;
  /** ALTER TABLE … ADD CONSTRAINT or CREATE INDEX, as PostgreSQL itself prints it. */
  definition: string;
  kind: 'primary' | 'index' | 'foreign';
}

/** Drops the loaded tables' keys and indexes (CHECK constraints stay), keeping their definitions. */
async function dropKeys(pool: pg.Pool): Promise<DroppedKey[]> {
  const constraints = await pool.query<{ table: string; name: string; def: string; type: string }>(
    `SELECT conrelid::regclass::text AS table, conname AS name, pg_get_constraintdef(oid) AS def, contype AS type
     FROM pg_constraint WHERE conrelid = ANY($1::regclass[]) AND contype IN ('p', 'u', 'f', 'x')`,
    [LOADED],
  );
  const indexes = await pool.query<{ table: string; name: string; def: string }>(
    `SELECT i.indrelid::regclass::text AS table, c.relname AS name, pg_get_indexdef(i.indexrelid) AS def
     FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = ANY($1::regclass[])
       AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.contype IN ('p', 'u', 'x'))`,
    [LOADED],
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
async function restoreKeys(pool: pg.Pool, dropped: DroppedKey[]): Promise<void> {
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

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `seed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
