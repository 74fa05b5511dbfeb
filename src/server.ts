import fs from 'node:fs/promises';
import path from 'node:path';
import { EmptyStore } from './errors.js';
import { scheduleImportSweep } from './contacts/imports/imports.service.js';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildServices, closeServices, type Services } from './services.js';
import { newLogger } from './logging.js';
import { WEBCHAT_TOPIC } from './webchat/webchat-wakeups.js';
import { CacheFeed, topicCaches } from './db/cache-feed.js';
import { systemClock } from './clock.js';
import type { Config } from './config.js';
import { createDb, migrate, storeExists, type Db } from './db/database.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './db/embedded/index.js';
import { MemoryRateLimiter, RedisRateLimiter, type RateLimiter } from './http/rate-limiter.js';
import { schedulePruning } from './http/idempotency.js';
import { scheduleRetention } from './db/retention.js';
import { inboundPruneTasks } from './inbound/retention.js';
import { webchatPruneTasks } from './webchat/retention.js';
import { JobRunner } from './jobs/job-runner.js';
import { INTERACTIVE_CHANNEL } from './jobs/background-gate.js';
import { Notifications } from './realtime/notifications.js';
import { WebhookDispatcher } from './webhooks/webhook-dispatcher.js';
import { loadSecretsKey } from './connections/secrets-key.js';
import { SecretBox } from './connections/secret-box.js';
import { WebhookSecrets } from './webhooks/webhook-secrets.js';
import { CONNECTION_TOPIC } from './connections/provider-resolver.js';
import type { Metrics } from './metrics/metrics.js';

export interface Store {
  db: Db;
  url: string;
  /** The database without a pooler between, for sessions (LISTEN): DATABASE_DIRECT_URL or `url`. */
  directUrl: string;
  /** SECRETS_KEY, or the embedded default's generated key. */
  secretsKey: Buffer;
  /** What pg_stat_activity shows for the process's connections (see APPLICATION_NAMES). */
  applicationName?: string;
  close(): Promise<void>;
}

/**
 * The names pg_stat_activity shows for a process's connections, by what runs on them: the API
 * (alone, or beside its workers' thread), the background workers (a `worker` process, or the
 * thread), or both on one event loop (WORKER_THREAD=false).
 */
export const APPLICATION_NAMES = {
  api: 'switchboard-api',
  workers: 'switchboard-workers',
  both: 'switchboard',
} as const;

const START_FIRST =
  'start the service first (switchboard serve), or pass --url to work through a running one';

/**
 * The configured PostgreSQL, or the embedded one under DATA_DIR; migrated either way, with its
 * secrets key (generated on the embedded default's first start), under which a migration seals
 * what was stored in clear. With `existing`, a store that was never created is refused
 * (EmptyStore) and nothing is created: no DATA_DIR or cluster for the embedded default, no
 * migrations table in DATABASE_URL.
 */
export async function openStore(
  config: Config,
  log: (line: string) => void = () => undefined,
  opts: {
    existing?: boolean;
    /** What pg_stat_activity shows for the store's connections (see createDb). */
    applicationName?: string;
  } = {},
): Promise<Store> {
  let embedded: EmbeddedPostgres | null = null;
  let url = config.databaseUrl;
  if (!url) {
    if (opts.existing && !(await clusterExists(config.dataDir))) {
      throw new EmptyStore(`no store in DATA_DIR ${config.dataDir}: ${START_FIRST}`);
    }
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, log });
    url = embedded.url;
  }
  const db = createDb(url, {
    preparedStatements: config.databasePreparedStatements,
    applicationName: opts.applicationName,
  });
  // The migrations take a lock for their whole run: on a session of their own, past any pooler.
  const direct = config.databaseDirectUrl
    ? createDb(config.databaseDirectUrl, {
        max: 1,
        preparedStatements: false,
        applicationName: opts.applicationName,
      })
    : null;
  let secretsKey: Buffer;
  try {
    if (opts.existing && !(await storeExists(direct ?? db))) {
      throw new EmptyStore(
        config.databaseUrl
          ? `no store in the database at DATABASE_URL (no migrations table): ${START_FIRST}`
          : `no store in DATA_DIR ${config.dataDir} (its database has no migrations table): ${START_FIRST}`,
      );
    }
    // On a first embedded start, the key file is made here, beside the cluster in DATA_DIR.
    secretsKey = await loadSecretsKey(config);
    const secrets = new WebhookSecrets(new SecretBox(secretsKey));
    await migrate(direct ?? db, (secret) => secrets.seal(secret));
  } catch (err) {
    await db.destroy();
    await embedded?.stop();
    throw err;
  } finally {
    await direct?.destroy();
  }
  return {
    db,
    url,
    directUrl: config.databaseDirectUrl ?? url,
    secretsKey,
    applicationName: opts.applicationName,
    close: async () => {
      await db.destroy();
      await embedded?.stop();
    },
  };
}

async function clusterExists(dataDir: string): Promise<boolean> {
  return fs.stat(path.join(dataDir, 'pg', 'PG_VERSION')).then(
    (stat) => stat.isFile(),
    () => false,
  );
}

/** The change feed that keeps the API's read caches correct (and enables them while it listens). */
export function listenForChanges(services: Services): CacheFeed {
  const feed = new CacheFeed(services.notifications);
  feed.subscribe('keys', services.caches.keys);
  // A contact changed or gone (merged into another, deleted) also wakes its visitor's open
  // widget streams, which then find the contact that now holds the visitor's identity.
  feed.subscribe('contact', topicCaches([services.caches.contact, services.webchat.wakeups], []));
  feed.subscribe('template', services.caches.template);
  feed.subscribe(
    CONNECTION_TOPIC,
    // A webchat connection changed or gone wakes the account's widget streams, which look it up.
    topicCaches(
      [services.caches.connection, services.webchat.wakeups.connectionChanges],
      [services.caches.connectionById],
    ),
  );
  feed.subscribe(WEBCHAT_TOPIC, services.webchat.wakeups);
  return feed;
}

export interface RunningService {
  /** The HTTP app; null in a process of workers only. */
  app: FastifyInstance | null;
  log: FastifyBaseLogger;
  /** The service's instruments (GET /metrics). */
  metrics: Metrics;
  stop(): Promise<void>;
}

/**
 * Starts the HTTP API and/or the background workers on an open store. `stop` stops taking
 * requests and jobs, lets claimed ones finish, and releases what it holds.
 */
export async function startService(
  config: Config,
  store: Store,
  roles: { api: boolean; workers: boolean } = { api: true, workers: true },
  /**
   * Where the workers run when an all-in-one process splits (see runtime/thread-launcher.ts):
   * `thread` for the API's half (its workers run on the thread), `this thread` for the thread's.
   * Only the process's last start says "switchboard started", once the API listens.
   */
  split?: { workers: 'thread' | 'this thread' },
): Promise<RunningService> {
  const appConfig = { ...config, secretsKey: store.secretsKey };
  // A process of workers only builds no HTTP app (nor loads its routes): the services alone.
  const http = roles.api ? await buildHttp(appConfig, store) : null;
  const log: FastifyBaseLogger =
    http?.app.log ?? newLogger(config.logLevel).child({ role: 'workers' });
  const services =
    http?.services ??
    buildServices({ config: appConfig, db: store.db, clock: systemClock, log, eventFeedUrl: null });
  const feed = roles.api && config.readCache ? listenForChanges(services) : null;
  await feed?.start();

  const runner = roles.workers
    ? new JobRunner({
        db: store.db,
        clock: systemClock,
        log,
        handlers: services.jobHandlers,
      })
    : null;
  // Workers hear the API sends of every process and yield to them (BackgroundGate), on a LISTEN
  // connection of their own (the shared one listens for an API's caches and streams only).
  const interactive =
    roles.workers && config.backgroundYieldMs > 0
      ? new Notifications({ url: store.directUrl, log, applicationName: store.applicationName })
      : null;
  interactive?.subscribe({ channel: INTERACTIVE_CHANNEL }, services.gate.listener);
  await interactive?.start();
  const dispatcher = roles.workers
    ? new WebhookDispatcher({
        db: store.db,
        clock: systemClock,
        log,
        allowPrivate: config.allowPrivateTargets,
        secrets: new WebhookSecrets(new SecretBox(store.secretsKey)),
        metrics: services.metrics,
      })
    : null;
  if (http) {
    const { app, rateLimiter } = http;
    const boot = await services.accounts.bootstrapDefaultAccount();
    if (boot) {
      // Printed once, on the first start of an empty store: only the hashes are kept. Should the
      // link be lost, `switchboard users invite` makes another.
      const setup = await services.users.setupLink(boot.account.id);
      process.stdout.write(
        `\nCreated account "${boot.account.name}" (${boot.account.id}, plan ${boot.account.plan}).\n` +
          `Its API key, shown only this once:\n\n  ${boot.key.api_key}\n\n` +
          `Create the first admin of the inbox (link valid until ${setup.expires_at}):\n\n  ${setup.invite_url}\n\n`,
      );
    }
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (err) {
      // Taken since main.ts found it free: release what started, so the store closes cleanly.
      await Promise.all([app.close(), rateLimiter.close(), feed?.stop()]);
      throw err;
    }
    const base = config.publicUrl;
    log.info(
      { api: `${base}/v1`, docs: `${base}/docs`, app: `${base}/app` },
      `Switchboard is listening: API ${base}/v1, docs ${base}/docs, app ${base}/app`,
    );
  }
  runner?.start();
  dispatcher?.start();
  const stopPruning = roles.workers
    ? schedulePruning({ db: store.db, clock: systemClock, log })
    : null;
  const stopImportSweep = roles.workers ? scheduleImportSweep(services.contactImports, log) : null;
  const stopRetention = roles.workers
    ? scheduleRetention({ db: store.db, clock: systemClock, log }, [
        ...inboundPruneTasks,
        ...webchatPruneTasks,
      ])
    : null;
  if (split?.workers === 'this thread') log.info('the workers started on their thread');
  else
    log.info({ api: roles.api, workers: split?.workers ?? roles.workers }, 'switchboard started');
  return {
    app: http?.app ?? null,
    log,
    metrics: services.metrics,
    stop: async () => {
      stopPruning?.();
      stopRetention?.();
      stopImportSweep?.();
      // Without an HTTP app, the services close once the jobs they run have finished.
      await Promise.all([http?.app.close(), runner?.stop(), dispatcher?.stop()]);
      if (!http) await closeServices(services);
      await Promise.all([http?.rateLimiter.close(), feed?.stop(), interactive?.stop()]);
      services.gate.stop();
    },
  };
}

/** The HTTP app (its module loaded only here) and the rate limiter its routes count with. */
async function buildHttp(
  config: Config & { secretsKey: Buffer },
  store: Store,
): Promise<{ app: FastifyInstance; services: Services; rateLimiter: RateLimiter }> {
  // The limiter exists before the app and its logger; its outage notices go there once it does.
  const logTo: { app?: FastifyBaseLogger } = {};
  const rateLimiter: RateLimiter = config.redisUrl
    ? new RedisRateLimiter({
        url: config.redisUrl,
        log: {
          warn: (obj, msg) => logTo.app?.warn(obj, msg),
          info: (obj, msg) => logTo.app?.info(obj, msg),
        },
      })
    : new MemoryRateLimiter();
  const { buildApp } = await import('./app.js');
  const { app, services } = await buildApp({
    config,
    db: store.db,
    rateLimiter,
    clock: systemClock,
    // LISTEN needs a session of its own: never through a pooler in transaction mode.
    eventFeedUrl: config.readCache ? store.directUrl : null,
    eventFeedName: store.applicationName,
  });
  logTo.app = app.log;
  return { app, services, rateLimiter };
}
