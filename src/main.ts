import net from 'node:net';
import { pathToFileURL } from 'node:url';
import { loadConfig, ConfigError } from './config.js';
import { applyHeapGrowth } from './runtime/heap-growth.js';
import { startWorkerThread, type WorkerThread } from './runtime/thread-launcher.js';
import { APPLICATION_NAMES, openStore, startService, type RunningService } from './server.js';

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
  applyHeapGrowth(config.heapGrowingPercent);
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
  // All in one: the workers on a thread of their own (see startWorkerThread), unless told not to.
  // It starts first, so that the API answers /readyz only once its workers run.
  const onThread = roles.api && roles.workers && config.workerThread;
  const store = await openStore(config, undefined, {
    applicationName:
      roles.api && (onThread || !roles.workers)
        ? APPLICATION_NAMES.api
        : roles.api
          ? APPLICATION_NAMES.both
          : APPLICATION_NAMES.workers,
  });
  let workers: WorkerThread | null = null;
  let running: RunningService;
  try {
    if (onThread)
      workers = await startWorkerThread(config, store, (err) => {
        // What a crash of the workers on the API's event loop would have done: end the process.
        process.stderr.write(
          `switchboard: the worker thread failed: ${err.stack ?? err.message}\n`,
        );
        process.exit(1);
      });
    running = await startService(
      config,
      store,
      { api: roles.api, workers: roles.workers && !onThread },
      onThread ? { workers: 'thread' } : undefined,
    );
  } catch (err) {
    await workers?.stop();
    await store.close();
    throw err;
  }
  const thread = workers;
  if (thread) running.metrics.addSource(() => thread.metrics());
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    running.log.info({ signal }, 'shutting down');
    // A second signal, or a drain that hangs, must still end the process.
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    // Both halves stop whatever the other's stop came to, before the store closes.
    void Promise.allSettled([running.stop(), thread?.stop()])
      .then(async (stops) => {
        const failed = stops.filter((s): s is PromiseRejectedResult => s.status === 'rejected');
        for (const { reason } of failed) running.log.error({ err: reason }, 'shutdown failed');
        await store.close();
        process.exit(failed.length > 0 ? 1 : 0);
      })
      .catch((err: unknown) => {
        running.log.error({ err }, 'shutdown failed');
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
