import { inject } from 'vitest';
import { buildApp, type AppConfig, type AppDeps } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createDb } from '../../src/db/database.js';
import { MemoryRateLimiter } from '../../src/http/rate-limiter.js';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { ADMIN_TOKEN, TestClock, type TestApp } from '../helpers.js';

/**
 * startTestApp with the send path's timings set: how long an API send waits for the provider
 * (`sendWaitMs`) and how long a send job's claim holds (`sendLeaseMs`). No read caches.
 */
export async function startSendTestApp(opts: {
  config?: Partial<AppConfig>;
  providers?: AppDeps['providers'];
  sendWaitMs?: number;
  sendLeaseMs?: number;
}): Promise<TestApp> {
  const db = createDb(inject('databaseUrl'), { max: 10 });
  const clock = new TestClock();
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
    providers: opts.providers,
    sendWaitMs: opts.sendWaitMs,
    sendLeaseMs: opts.sendLeaseMs,
  });
  await app.ready();
  return {
    app,
    db,
    services,
    clock,
    feed: null,
    close: async () => {
      await app.close();
      await rateLimiter.close();
      await db.destroy();
    },
  };
}

/** A job runner of one account's jobs (so that no other test's work is taken). */
export function runnerOf(t: TestApp, accountId: string, leaseMs?: number): JobRunner {
  return new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
    accountId,
    leaseMs,
  });
}
