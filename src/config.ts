import { isIP } from 'node:net';
import path from 'node:path';

/** Every setting of the service, read once from the environment and validated. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  /**
   * The same database without a pooler between (DATABASE_DIRECT_URL), for what needs a session
   * of its own: LISTEN, and the migrations. Set it when DATABASE_URL names PgBouncer in
   * transaction mode; null means DATABASE_URL serves for both.
   */
  databaseDirectUrl: string | null;
  /**
   * Named prepared statements; off for poolers that cannot keep them (PgBouncer transaction mode
   * before 1.21). Off by default when DATABASE_DIRECT_URL is set (a pooler is in front).
   */
  databasePreparedStatements: boolean;
  /** In-process caches of key owners and contacts, kept correct through LISTEN/NOTIFY; off behind PgBouncer's transaction mode. */
  readCache: boolean;
  redisUrl: string | null;
  adminToken: string | null;
  /** Bearer token that GET /metrics requires; open without one. */
  metricsToken: string | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  allowPrivateTargets: boolean;
  /** Unconnected channels send through the sandbox, and the sandbox routes exist. */
  sandboxEnabled: boolean;
  sandboxAutoAdvance: boolean;
  sandboxDeliveredAfterMs: number;
  sandboxReadAfterMs: number;
  /** Broadcast messages per second per channel; 0 means no limit. */
  broadcastRatePerSecond: Record<'whatsapp' | 'instagram' | 'messenger' | 'webchat', number>;
  /** Recipients per broadcast batch (one transaction each). */
  broadcastBatchSize: number;
  /**
   * How long broadcasts hold back their batches and provider calls after an API send began in
   * any process (BACKGROUND_YIELD_MS); 0: never (see BackgroundGate).
   */
  backgroundYieldMs: number;
  /** Media fetches at once in this process; 4 times as many sends may wait, more get a 503. */
  mediaFetchConcurrency: number;
  /** The largest media file the service keeps, in bytes: an inbound one from a provider, or an upload (POST /v1/media). */
  mediaMaxBytes: number;
  /** How far V8's old generation may grow past what it keeps, in percent; 0: V8's own (runtime/heap-growth.ts). */
  heapGrowingPercent: number;
  /**
   * Whether a service that runs both the API and the workers runs the workers on a thread of its
   * own (WORKER_THREAD, runtime/thread-launcher.ts), rather than on the API's event loop.
   */
  workerThread: boolean;
  /**
   * How many nice steps below the API the worker thread runs (WORKER_THREAD_NICE; Linux): under
   * full CPU the API's requests run first and a broadcast takes what is left; 0: the same.
   */
  workerThreadNice: number;
  /** The largest CSV file `POST /v1/contacts/imports` takes (IMPORT_MAX_BYTES). */
  importMaxBytes: number;
  /** Where Meta's Graph API is (tests point it at a local fake), without a trailing slash. */
  metaGraphUrl: string;
  /** The Graph API version in every request path, as `v23.0`. */
  metaGraphVersion: string;
  /** Requests per minute of each signed-in user (the inbox app), instead of the plan's API limit. */
  sessionRateLimitPerMinute: number;
  /** The service's public base URL (webhook URLs, the widget, the API document's server), no trailing slash. */
  publicUrl: string;
  /**
   * 32 bytes that encrypt connection and webhook secrets: required with DATABASE_URL, generated
   * into DATA_DIR on the embedded default (null here until it is loaded).
   */
  secretsKey: Buffer | null;
  /**
   * Which proxies' X-Forwarded-For to believe for the client's address (per-address rate
   * limits, logs): false (none, the default), a number of hops, or the proxies' addresses and
   * CIDR ranges.
   */
  trustProxy: false | number | string[];
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
  }
  return Number(raw);
}

function readBool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false (got "${raw}")`);
}

function readUrl(env: Env, name: string, protocols: string[]): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(`${name} must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return raw;
}

function readSecretsKey(env: Env, databaseUrl: string | null): Buffer | null {
  const raw = env.SECRETS_KEY ?? '';
  // The embedded default keeps a key it generated in DATA_DIR; a database of one's own has
  // nowhere to keep one beside it, and its webhook secrets are sealed under it.
  if (raw === '' && databaseUrl)
    throw new ConfigError(
      'SECRETS_KEY is required with DATABASE_URL: webhook and connection secrets are stored encrypted under it (make one with openssl rand -base64 32, and keep it)',
    );
  if (raw === '') return null;
  const key = Buffer.from(raw, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(raw) || key.length !== 32) {
    throw new ConfigError(
      'SECRETS_KEY must be the base64 of 32 random bytes (openssl rand -base64 32)',
    );
  }
  return key;
}

/**
 * TRUST_PROXY: unset or `false`, a number of proxy hops in front of the service (1–10), or a
 * comma-separated list of the proxies' addresses and CIDR ranges (`10.0.0.0/8,::1`). `true`
 * (believe any X-Forwarded-For) is refused: a client could then claim any address.
 */
function readTrustProxy(env: Env): Config['trustProxy'] {
  const raw = (env.TRUST_PROXY ?? '').trim();
  if (raw === '' || raw === 'false') return false;
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops < 1 || hops > 10) throw new ConfigError('TRUST_PROXY hops must be between 1 and 10');
    return hops;
  }
  const entries = raw.split(',').map((e) => e.trim());
  for (const entry of entries) {
    const [address, prefix, ...rest] = entry.split('/');
    const version = isIP(address ?? '');
    const bits = version === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (version === 0 || !prefixOk || rest.length > 0)
      throw new ConfigError(
        `TRUST_PROXY must be false, a number of hops, or proxy addresses and CIDR ranges separated by commas (got "${entry}")`,
      );
  }
  return entries;
}

export function loadConfig(env: Env = process.env): Config {
  const logLevel = env.LOG_LEVEL ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logLevel}")`);
  }
  const adminToken = env.ADMIN_TOKEN ?? '';
  if (adminToken !== '' && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN must be at least 16 characters long');
  }
  const metricsToken = env.METRICS_TOKEN ?? '';
  if (metricsToken !== '' && metricsToken.length < 16) {
    throw new ConfigError('METRICS_TOKEN must be at least 16 characters long');
  }
  const port = readInt(env, 'PORT', 3000, 0, 65535);
  const host = env.HOST || '127.0.0.1';
  const graphVersion = env.META_GRAPH_VERSION || 'v23.0';
  if (!/^v\d{1,3}\.\d{1,3}$/.test(graphVersion)) {
    throw new ConfigError(`META_GRAPH_VERSION must look like v23.0 (got "${graphVersion}")`);
  }
  const databaseUrl = readUrl(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const publicUrl =
    readUrl(env, 'PUBLIC_URL', ['http:', 'https:']) ??
    `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const databaseDirectUrl = readUrl(env, 'DATABASE_DIRECT_URL', ['postgres:', 'postgresql:']);
  if (databaseDirectUrl && !databaseUrl) {
    throw new ConfigError(
      'DATABASE_DIRECT_URL is the direct way to the database that DATABASE_URL names through a pooler: set DATABASE_URL too',
    );
  }
  return {
    port,
    host,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    databaseUrl,
    databaseDirectUrl,
    databasePreparedStatements: readBool(
      env,
      'DATABASE_PREPARED_STATEMENTS',
      databaseDirectUrl === null,
    ),
    readCache: readBool(env, 'READ_CACHE', true),
    trustProxy: readTrustProxy(env),
    redisUrl: readUrl(env, 'REDIS_URL', ['redis:', 'rediss:']),
    adminToken: adminToken === '' ? null : adminToken,
    metricsToken: metricsToken === '' ? null : metricsToken,
    logLevel: logLevel as Config['logLevel'],
    allowPrivateTargets: readBool(env, 'ALLOW_PRIVATE_TARGETS', false),
    sandboxAutoAdvance: readBool(env, 'SANDBOX_AUTO_ADVANCE', true),
    sandboxDeliveredAfterMs: readInt(env, 'SANDBOX_DELIVERED_AFTER_MS', 1000, 0, 86_400_000),
    sandboxReadAfterMs: readInt(env, 'SANDBOX_READ_AFTER_MS', 3000, 0, 86_400_000),
    broadcastRatePerSecond: {
      whatsapp: readInt(env, 'BROADCAST_RATE_WHATSAPP', 0, 0, 100_000),
      instagram: readInt(env, 'BROADCAST_RATE_INSTAGRAM', 0, 0, 100_000),
      messenger: readInt(env, 'BROADCAST_RATE_MESSENGER', 0, 0, 100_000),
      webchat: readInt(env, 'BROADCAST_RATE_WEBCHAT', 0, 0, 100_000),
    },
    broadcastBatchSize: readInt(env, 'BROADCAST_BATCH_SIZE', 500, 1, 10_000),
    backgroundYieldMs: readInt(env, 'BACKGROUND_YIELD_MS', 0, 0, 1_000),
    sessionRateLimitPerMinute: readInt(env, 'SESSION_RATE_LIMIT_PER_MINUTE', 1200, 1, 1_000_000),
    mediaFetchConcurrency: readInt(env, 'MEDIA_FETCH_CONCURRENCY', 16, 1, 1024),
    mediaMaxBytes: readInt(env, 'MEDIA_MAX_BYTES', 16 * 1024 * 1024, 1024, 100 * 1024 * 1024),
    heapGrowingPercent: readInt(env, 'HEAP_GROWING_PERCENT', 100, 0, 300),
    workerThread: readBool(env, 'WORKER_THREAD', true),
    workerThreadNice: readInt(env, 'WORKER_THREAD_NICE', 10, 0, 19),
    importMaxBytes: readInt(
      env,
      'IMPORT_MAX_BYTES',
      100 * 1024 * 1024,
      1024,
      10 * 1024 * 1024 * 1024,
    ),
    sandboxEnabled: readBool(env, 'SANDBOX_ENABLED', true),
    metaGraphUrl: (
      readUrl(env, 'META_GRAPH_URL', ['http:', 'https:']) ?? 'https://graph.facebook.com'
    ).replace(/\/+$/, ''),
    metaGraphVersion: graphVersion,
    publicUrl: publicUrl.replace(/\/+$/, ''),
    secretsKey: readSecretsKey(env, databaseUrl),
  };
}
