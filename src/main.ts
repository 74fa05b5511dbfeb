import { pathToFileURL } from 'node:url';
import { loadConfig, ConfigError } from './config.js';
import { openStore, startService } from './server.js';

/**
 * `npm start`: the API and the workers on the configured (or embedded) PostgreSQL, until
 * SIGTERM or SIGINT; `roles` runs only one of the two (scaling out).
 */
export async function serve(
  roles: { api: boolean; workers: boolean } = { api: true, workers: true },
): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`switchboard: configuration error: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const store = await openStore(config);
  let service;
  try {
    service = await startService(config, store, roles);
  } catch (err) {
    await store.close();
    throw err;
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.app.log.info({ signal }, 'shutting down');
    // A second signal, or a drain that hangs, must still end the process.
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    void service
      .stop()
      .then(() => store.close())
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        service.app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  serve().catch((err: unknown) => {
    process.stderr.write(
      `switchboard: failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(1);
  });
}
