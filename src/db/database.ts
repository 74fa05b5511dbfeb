import { createHash } from 'node:crypto';
import {
  DEFAULT_MIGRATION_TABLE,
  Kysely,
  Migrator,
  sql,
  PostgresDialect,
  type Migration,
  type PostgresPool,
  type PostgresPoolClient,
  type Transaction,
} from 'kysely';
import pg from 'pg';
import type { Tables } from './schema.js';
import * as m001 from './migrations/001_foundation.js';
import * as m002 from './migrations/002_inbox.js';
import * as m003 from './migrations/003_webhooks.js';
import * as m004 from './migrations/004_broadcasts.js';
import * as m005 from './migrations/005_hot_queues.js';
import * as m006 from './migrations/006_cache_notifications.js';
import * as m007 from './migrations/007_dead_jobs_and_retention.js';
import * as m008 from './migrations/008_channel_connections.js';
import * as m009 from './migrations/009_connection_insert_notify.js';
import * as m010 from './migrations/010_contact_identities.js';
import * as m011 from './migrations/011_event_notify.js';
import * as m012 from './migrations/012_webchat_visitors.js';
import * as m013 from './migrations/013_broadcast_counters.js';
import * as m014 from './migrations/014_template_notify.js';
import * as m015 from './migrations/015_webchat_visitor_contact.js';
import * as m016 from './migrations/016_broadcast_awaiting.js';
import * as m017 from './migrations/017_channel_pacing.js';
import * as m018 from './migrations/018_provider_id_aliases.js';
import * as m019 from './migrations/019_scheduled_at_range.js';
import * as m020 from './migrations/020_retention_indexes.js';
import * as m021 from './migrations/021_canned_responses.js';
import * as m022 from './migrations/022_conversation_read.js';
import * as m023 from './migrations/023_people.js';
import * as m024 from './migrations/024_unassigned_conversations.js';
import * as m025 from './migrations/025_conversation_search.js';
import * as m026 from './migrations/026_event_notify_per_statement.js';
import * as m027 from './migrations/027_conversation_search_contact.js';
import * as m028 from './migrations/028_conversation_counts.js';
import * as m029 from './migrations/029_contact_imports.js';
import * as m030 from './migrations/030_webhook_attempt_details.js';
import * as m031 from './migrations/031_broadcast_progress_events.js';
import * as m032 from './migrations/032_contact_name_keys.js';
import * as m033 from './migrations/033_contact_import_heartbeat.js';
import * as m034 from './migrations/034_contact_counts.js';
import * as m036 from './migrations/036_job_settling.js';
import * as m037 from './migrations/037_webchat_vouched_by.js';
import * as m038 from './migrations/038_contact_search.js';
import * as m039 from './migrations/039_contact_channel_counts.js';
import * as m040 from './migrations/040_send_in_flight.js';
import * as m041 from './migrations/041_broadcast_index_writes.js';
import {
  sealWebhookSecrets,
  type SealWebhookSecret,
} from './migrations/035_webhook_secret_boxes.js';

export type { SealWebhookSecret } from './migrations/035_webhook_secret_boxes.js';

export type Db = Kysely<Tables>;
export type Tx = Transaction<Tables>;

// bigint columns (event seq, counts) come back as strings; counts we read are small.
pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => value);

/**
 * Runs the repeated statements as named prepared statements, so PostgreSQL parses and plans
 * each once per connection (a third fewer round-trip messages and no re-planning). Only
 * parametrized statements without `*` qualify: their result type cannot change when a later
 * migration adds a column, which would otherwise invalidate the cached plan mid-deployment.
 */
/**
 * Appended to a statement whose best plan depends on its values (a search pattern, a tag): it is
 * then never prepared by name, so PostgreSQL plans each execution for the values it gets instead
 * of possibly settling on one generic plan (which, for a search, walks every contact of the
 * account rather than using the trigram indexes).
 */
export const CUSTOM_PLAN = sql.raw('/* custom plan */');
const CUSTOM_PLAN_MARK = '/* custom plan */';

/**
 * Appended to a long statement whose text never varies with its input (its rows are passed as
 * arrays), and which names every column it returns (no `*`, as for every prepared statement):
 * it is prepared by name whatever its length. Without it, statements longer than
 * MAX_PREPARED_TEXT are not, because the longest generated ones are VALUES lists with one text
 * per row count, each of which would hold a plan on every connection.
 */
export const FIXED_TEXT = sql.raw('/* fixed text */');
const FIXED_TEXT_MARK = '/* fixed text */';

/**
 * An array parameter whose length the planner does not see: `unnest(${batchArray(ids, 'text')})`
 * is estimated at a few rows, as in a generic plan, however many it holds. A batch of hundreds
 * joined to a large table is then planned as what it is, one index lookup per row: seen at its
 * real length, it was planned as a scan and hash of the whole table whenever that table was
 * still small enough (tens of thousands of rows) for the scan to look cheaper than the lookups.
 */
export function batchArray(
  values: readonly unknown[],
  type: 'text' | 'boolean' | 'int' | 'timestamptz' | 'jsonb',
) {
  return sql`(SELECT ${values}::${sql.raw(type)}[])`;
}
const MAX_PREPARED_TEXT = 4_000;

function preparingPool(pool: pg.Pool): PostgresPool {
  // Statement names by text; the set of statements the code can build is finite, the cap a guard.
  const names = new Map<string, string>();
  const nameOf = (text: string) => {
    let name = names.get(text);
    if (name === undefined) {
      name = `sb_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
      if (names.size < 10_000) names.set(text, name);
    }
    return name;
  };
  return {
    connect: async () => {
      const client = await pool.connect();
      const query = (text: string, values: readonly unknown[]) =>
        values.length > 0 &&
        (text.endsWith(FIXED_TEXT_MARK) ||
          (text.length <= MAX_PREPARED_TEXT &&
            !text.includes('*') &&
            !text.includes(CUSTOM_PLAN_MARK)))
          ? client.query({ name: nameOf(text), text, values: [...values] })
          : client.query(text, [...values]);
      return { query, release: () => client.release() } as unknown as PostgresPoolClient;
    },
    end: () => pool.end(),
  };
}

export function createDb(
  url: string,
  opts: {
    max?: number;
    preparedStatements?: boolean;
    connectionTimeoutMs?: number;
    /**
     * What pg_stat_activity shows for these connections (`switchboard-api`, …), so that an
     * operator tells the API's sessions from the workers'; one named in `url` wins.
     */
    applicationName?: string;
  } = {},
): Db {
  const pool = new pg.Pool({
    connectionString: url,
    application_name: opts.applicationName,
    max: opts.max ?? 20,
    // Without it a request waits forever for a connection while the database is unreachable
    // (a server that accepts no connections, a dropped network); with it the request fails
    // and answers 503 `unavailable`.
    connectionTimeoutMillis: opts.connectionTimeoutMs ?? 5_000,
    // A server that vanished without closing its sockets is noticed by TCP, not never; and
    // probes from the first idle minute keep a connection held idle (below) known to the NAT
    // tables and load balancers between here and the server, which drop quiet ones.
    keepAlive: true,
    keepAliveInitialDelayMillis: 60_000,
    // pg's default closes a connection after 10 s idle: a service that was quiet for a moment
    // then met its next burst on new connections, each forked by the server, its catalog caches
    // cold and every prepared statement parsed and planned again (the slowest requests of a
    // burst). Idle connections are kept for 10 minutes, as HikariCP and PgBouncer do.
    idleTimeoutMillis: 600_000,
  });
  // An idle client that loses its server must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  // The pool listens only to idle clients. One checked out (a transaction between statements)
  // whose server goes away would emit an unheard 'error' and crash the process; its next
  // statement fails instead (503 `unavailable`), and the pool discards it on release.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return new Kysely<Tables>({
    dialect: new PostgresDialect({
      pool: opts.preparedStatements === false ? pool : preparingPool(pool),
    }),
  });
}

/**
 * Every migration, in order. Those that encrypt what they store are given the means:
 * `sealWebhookSecret` (null without SECRETS_KEY, and then a store with webhooks is refused).
 */
export function migrations(sealWebhookSecret: SealWebhookSecret): Record<string, Migration> {
  return {
    ...plainMigrations,
    '035_webhook_secret_boxes': sealWebhookSecrets(sealWebhookSecret),
  };
}

const plainMigrations: Record<string, Migration> = {
  '001_foundation': m001,
  '002_inbox': m002,
  '003_webhooks': m003,
  '004_broadcasts': m004,
  '005_hot_queues': m005,
  '006_cache_notifications': m006,
  '007_dead_jobs_and_retention': m007,
  '008_channel_connections': m008,
  '009_connection_insert_notify': m009,
  '010_contact_identities': m010,
  '011_event_notify': m011,
  '012_webchat_visitors': m012,
  '013_broadcast_counters': m013,
  '014_template_notify': m014,
  '015_webchat_visitor_contact': m015,
  '016_broadcast_awaiting': m016,
  '017_channel_pacing': m017,
  '018_provider_id_aliases': m018,
  '019_scheduled_at_range': m019,
  '020_retention_indexes': m020,
  '021_canned_responses': m021,
  '022_conversation_read': m022,
  '023_people': m023,
  '024_unassigned_conversations': m024,
  '025_conversation_search': m025,
  '026_event_notify_per_statement': m026,
  '027_conversation_search_contact': m027,
  '028_conversation_counts': m028,
  '029_contact_imports': m029,
  '030_webhook_attempt_details': m030,
  '031_broadcast_progress_events': m031,
  '032_contact_name_keys': m032,
  '033_contact_import_heartbeat': m033,
  '034_contact_counts': m034,
  '036_job_settling': m036,
  '037_webchat_vouched_by': m037,
  '038_contact_search': m038,
  '039_contact_channel_counts': m039,
  '040_send_in_flight': m040,
  '041_broadcast_index_writes': m041,
};

/** Whether the database holds a store: the migrator's table exists (the first start made it). */
export async function storeExists(db: Db): Promise<boolean> {
  const { rows } = await sql<{
    found: string | null;
  }>`SELECT to_regclass(${DEFAULT_MIGRATION_TABLE})::text AS found`.execute(db);
  return rows[0]?.found != null;
}

/** Applies pending migrations; Kysely's migrator takes a lock, so concurrent starts are safe. */
export async function migrate(db: Db, sealWebhookSecret: SealWebhookSecret): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations(sealWebhookSecret) },
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(
      `migration ${failed?.migrationName ?? '?'} failed: ${error instanceof Error ? error.message : JSON.stringify(error)}`,
      {
        cause: error,
      },
    );
  }
}
