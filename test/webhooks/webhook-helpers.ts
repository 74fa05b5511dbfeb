import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { inject } from 'vitest';
import { buildApp, type AppConfig } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createDb, migrate, type Db } from '../../src/db/database.js';
import { MemoryRateLimiter } from '../../src/http/rate-limiter.js';
import { WebhookDispatcher, type DispatcherOptions } from '../../src/webhooks/webhook-dispatcher.js';
import { ADMIN_TOKEN, TestClock, type TestApp } from '../helpers.js';
import { freezeClock } from '../inbox-helpers.js';

export interface WebhookTestApp extends TestApp {
  /** The URL of this file's own database. */
  databaseUrl: string;
  /** A dispatcher on this app's database and clock (allowPrivate, random 0.5 unless given). */
  dispatcher(opts?: Partial<DispatcherOptions>): WebhookDispatcher;
}

/**
 * A test app on a database of its own. A webhook dispatcher claims due deliveries of every
 * account in its database, so dispatchers of concurrently running files on one database would
 * deliver (or, without allowPrivate, refuse) each other's deliveries, and a test that moves its
 * clock hours ahead would fire other files' retries. One database per file keeps them apart.
 * The clock is frozen: only `advance()` moves it, so retry boundaries are exact.
 */
export async function startWebhookTestApp(opts: { config?: Partial<AppConfig>; frozen?: boolean } = {}): Promise<WebhookTestApp> {
  const baseUrl = inject('databaseUrl');
  const name = `switchboard_wh_${randomBytes(6).toString('hex')}`;
  const admin = createDb(baseUrl, { max: 1 });
  await sql.raw(`CREATE DATABASE "${name}"`).execute(admin);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  const databaseUrl = url.href;
  const db: Db = createDb(databaseUrl, { max: 10 });
  await migrate(db);
  const clock = new TestClock();
  if (opts.frozen ?? true) freezeClock(clock);
  const rateLimiter = new MemoryRateLimiter();
  const { app, services } = await buildApp({
    config: {
      ...loadConfig({}),
      adminToken: ADMIN_TOKEN,
      logLevel: 'silent',
      allowPrivateTargets: true,
      sandboxAutoAdvance: false,
      ...opts.config,
    },
    db,
    rateLimiter,
    clock,
  });
  await app.ready();
  return {
    app,
    db,
    services,
    clock,
    databaseUrl,
    dispatcher: (o = {}) => new WebhookDispatcher({ db, clock, log: app.log, allowPrivate: true, random: () => 0.5, ...o }),
    close: async () => {
      await app.close();
      await rateLimiter.close();
      await db.destroy();
      await sql.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).execute(admin);
      await admin.destroy();
    },
  };
}
