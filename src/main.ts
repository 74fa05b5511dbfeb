import net from 'node:net';
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
  // A busy port is refused before the store is opened (or made), so nothing is written for a
  // service that could not have run.
  if (roles.api) {
    const busy = await portInUse(config.host, config.port);
    if (busy) {
      process.stderr.write(
        `switchboard: ${config.host}:${config.port} is ${busy}: stop what listens there or set PORT (and HOST)\n`,
      );
      process.exit(1);
    }
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

/** Why `host:port` cannot be listened on (`in use`, `not an address of this machine`), or null. */
function portInUse(host: string, port: number): Promise<string | null> {
  if (port === 0) return Promise.resolve(null);
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      resolve(
        err.code === 'EADDRINUSE'
          ? 'in use'
          : err.code === 'EADDRNOTAVAIL'
            ? 'not an address of this machine'
            : err.code === 'EACCES'
              ? 'not allowed to this user'
              : `unusable (${err.code ?? err.message})`,
      ),
    );
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(null)));
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  serve().catch((err: unknown) => {
    process.stderr.write(
      `switchboard: failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
    );
    process.exit(1);
  });
}
