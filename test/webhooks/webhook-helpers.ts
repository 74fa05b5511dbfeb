import type { AppConfig } from '../../src/services.js';
import {
  WebhookDispatcher,
  type DispatcherOptions,
} from '../../src/webhooks/webhook-dispatcher.js';
import { createPrivateDatabase, startTestApp, type TestApp } from '../helpers.js';
import { freezeClock } from '../inbox-helpers.js';
import { testWebhookSecrets } from '../secrets-key.js';

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
export async function startWebhookTestApp(
  opts: { config?: Partial<AppConfig>; frozen?: boolean } = {},
): Promise<WebhookTestApp> {
  const database = await createPrivateDatabase();
  const t = await startTestApp({ databaseUrl: database.url, config: opts.config });
  if (opts.frozen ?? true) freezeClock(t.clock);
  return {
    ...t,
    databaseUrl: database.url,
    dispatcher: (o = {}) =>
      new WebhookDispatcher({
        db: t.db,
        secrets: testWebhookSecrets(opts.config?.secretsKey ?? undefined),
        clock: t.clock,
        log: t.app.log,
        allowPrivate: true,
        random: () => 0.5,
        ...o,
      }),
    close: async () => {
      await t.close();
      await database.drop();
    },
  };
}
