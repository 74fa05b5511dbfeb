import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../src/app.js';
import { type AppConfig, type AppDeps, type Services } from '../src/services.js';
import { loadConfig } from '../src/config.js';
import type { Clock } from '../src/clock.js';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createDb, migrate, type Db } from '../src/db/database.js';
import type { Plan } from '../src/db/schema.js';
import { MemoryRateLimiter, type RateLimiter } from '../src/http/rate-limiter.js';
import type { StallLimits } from '../src/http/body-stall.js';
import type { CacheFeed } from '../src/db/cache-feed.js';
import { listenForChanges } from '../src/server.js';
import { testDatabaseUrl } from './database.js';
import { installConformanceCheck, takeMismatches } from './openapi-conformance.js';
import { sealForTests, TEST_SECRETS_KEY } from './secrets-key.js';
import { SANDBOX_FAILING_SUFFIX } from '../src/channels/sandbox/sandbox.provider.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/** A clock tests can move; starts at the real time. */
export class TestClock implements Clock {
  private offsetMs = 0;
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}

export interface TestApp {
  app: FastifyInstance;
  db: Db;
  services: Services;
  clock: TestClock;
  /** The change feed of the read caches, or null when they are off. */
  feed: CacheFeed | null;
  close(): Promise<void>;
}

export async function startTestApp(
  opts: {
    rateLimiter?: RateLimiter;
    adminToken?: string | null;
    config?: Partial<AppConfig>;
    /** Another database than the run's shared one (see createPrivateDatabase). */
    databaseUrl?: string;
    /** The read caches and their change feed, as a service runs them (on unless false). */
    readCache?: boolean;
    /** Providers that replace the sandbox on some channels. */
    providers?: AppDeps['providers'];
    /** Keep-alive interval and caps of the live event streams. */
    eventStreams?: AppDeps['eventStreams'];
    /** The webchat visitor endpoints' rate limits. */
    webchatLimits?: AppDeps['webchatLimits'];
    /** How long an API send waits for the provider's answer (10 s by default). */
    sendWaitMs?: AppDeps['sendWaitMs'];
    /** How long a send's first attempt holds its job before a runner may send again. */
    sendLeaseMs?: AppDeps['sendLeaseMs'];
    /** Where the service's log lines go (with a `logLevel` in `config`: it is silent by default). */
    logStream?: AppDeps['logStream'];
    /** When a request body that stops arriving is ended with 408. */
    bodyStall?: StallLimits;
  } = {},
): Promise<TestApp> {
  const url = opts.databaseUrl ?? testDatabaseUrl();
  const db = createDb(url, { max: 10 });
  const clock = new TestClock();
  const rateLimiter = opts.rateLimiter ?? new MemoryRateLimiter();
  const { app, services } = await buildApp({
    config: {
      ...loadConfig({}),
      adminToken: opts.adminToken === undefined ? ADMIN_TOKEN : opts.adminToken,
      logLevel: 'silent',
      // Test receivers and media servers listen on 127.0.0.1.
      allowPrivateTargets: true,
      // Statuses move only when a test moves them (through the endpoint or by draining jobs).
      sandboxAutoAdvance: false,
      // As a service always has one (SECRETS_KEY, or the embedded default's own).
      secretsKey: TEST_SECRETS_KEY,
      ...opts.config,
    },
    db,
    rateLimiter,
    clock,
    providers: opts.providers,
    // The event feed listens as a service's does (it connects only when a stream opens).
    eventFeedUrl: opts.readCache === false ? null : url,
    eventStreams: opts.eventStreams,
    webchatLimits: opts.webchatLimits,
    sendWaitMs: opts.sendWaitMs,
    sendLeaseMs: opts.sendLeaseMs,
    logStream: opts.logStream,
    bodyStall: opts.bodyStall,
  });
  // Every response is checked against docs/openapi.json (test/setup.ts fails the test).
  installConformanceCheck(app);
  await app.ready();
  const feed = opts.readCache === false ? null : listenForChanges(services);
  await feed?.start();
  return {
    app,
    db,
    services,
    clock,
    feed,
    close: async () => {
      await app.close();
      await feed?.stop();
      await rateLimiter.close();
      await db.destroy();
      const left = takeMismatches();
      if (left.length > 0)
        throw new Error(`responses that docs/openapi.json does not describe:\n${left.join('\n')}`);
    },
  };
}

/**
 * A migrated database of one test file alone, on the test server. Accounts isolate data but not
 * background work: every job runner and webhook dispatcher claims due work of every account in
 * its database, so files that drive workers (and move their clocks) keep that work apart.
 */
export async function createPrivateDatabase(
  opts: { migrated?: boolean } = {},
): Promise<{ url: string; drop: () => Promise<void> }> {
  const base = testDatabaseUrl();
  const name = `switchboard_t_${randomBytes(6).toString('hex')}`;
  const onServer = async (statement: ReturnType<typeof sql>) => {
    const admin = createDb(base, { max: 1, preparedStatements: false });
    try {
      await statement.execute(admin);
    } finally {
      await admin.destroy();
    }
  };
  await onServer(sql`CREATE DATABASE ${sql.id(name)}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  // Empty, for a test of the migrations themselves.
  if (opts.migrated !== false) {
    const db = createDb(url.toString(), { max: 1 });
    try {
      await migrate(db, sealForTests);
    } finally {
      await db.destroy();
    }
  }
  return {
    url: url.toString(),
    drop: () => onServer(sql`DROP DATABASE IF EXISTS ${sql.id(name)} WITH (FORCE)`),
  };
}

export interface TestAccount {
  accountId: string;
  apiKey: string;
  keyId: string;
  /** An inject call with this account's key. */
  call(opts: InjectOptions): Promise<LightMyRequestResponse>;
}

/** A fresh account per test: no test sees another's data, and no table is ever truncated. */
export async function newAccount(
  t: Pick<TestApp, 'app' | 'services'>,
  opts: { plan?: Plan; rateLimit?: number | null } = {},
): Promise<TestAccount> {
  const account = await t.services.accounts.createAccount({
    name: 'Test',
    plan: opts.plan ?? 'growth',
    rate_limit_per_minute: opts.rateLimit === undefined ? 100_000 : opts.rateLimit,
  });
  const key = await t.services.accounts.createApiKey(account.id, 'test');
  return {
    accountId: account.id,
    apiKey: key.api_key,
    keyId: key.id,
    call: (o) =>
      t.app.inject({
        ...o,
        headers: { authorization: `Bearer ${key.api_key}`, ...(o.headers ?? {}) },
      }),
  };
}

// A random start per process, then a counter: unique within the process (so two contacts of one
// account never collide by chance), and processes start far apart.
let phoneCounter = Math.floor(Math.random() * 10_000_000);
/**
 * A valid US number for tests (+1 415 xxx xxxx), never repeated within one test process, and
 * never one the sandbox fails (those are asked for by name, with SANDBOX_FAILING_SUFFIX).
 */
export function randomPhone(): string {
  let phone: string;
  do {
    phoneCounter = (phoneCounter + 1) % 10_000_000;
    phone = `+1415${String(phoneCounter).padStart(7, '0')}`;
  } while (phone.endsWith(SANDBOX_FAILING_SUFFIX));
  return phone;
}
