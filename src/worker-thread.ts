// The worker thread of an all-in-one service (see runtime/thread-launcher.ts): the background
// workers on the store the main thread opened and migrated, until the main thread says stop.
import { parentPort, workerData } from 'node:worker_threads';
import { createDb } from './db/database.js';
import { APPLICATION_NAMES, startService } from './server.js';
import type { FromThread, ToThread, WorkerThreadData } from './runtime/thread-launcher.js';
import { lowerThreadPriority } from './runtime/thread-priority.js';

const data = workerData as WorkerThreadData;
const port = parentPort;
if (!port) throw new Error('worker-thread.ts runs only as a worker thread');

const config = {
  ...data.config,
  databaseUrl: data.databaseUrl,
  secretsKey: Buffer.from(data.secretsKeyHex, 'hex'),
};
const db = createDb(data.databaseUrl, {
  preparedStatements: config.databasePreparedStatements,
  applicationName: APPLICATION_NAMES.workers,
});
const store = {
  db,
  url: data.databaseUrl,
  directUrl: data.databaseDirectUrl,
  secretsKey: config.secretsKey,
  applicationName: APPLICATION_NAMES.workers,
  close: () => db.destroy(),
};
// Background work gives way to the API's requests when the cores are busy (WORKER_THREAD_NICE).
const nice = lowerThreadPriority(config.workerThreadNice);
const service = await startService(
  config,
  store,
  { api: false, workers: true },
  { workers: 'this thread' },
);
const post = (msg: FromThread) => port.postMessage(msg);
port.on('message', (msg: ToThread) => {
  if (msg.type === 'metrics') {
    // Unanswered, the scrape shows the counters sent last (see WorkerThread.metrics).
    service.metrics.ownCounters().then(
      (metrics) => post({ type: 'metrics', id: msg.id, metrics }),
      (err: unknown) => service.log.warn({ err }, "reading the workers' counters failed"),
    );
  } else if (msg.type === 'stop') {
    void service
      .stop()
      .then(() => store.close())
      // Only this thread ends (a worker thread's process.exit); 1 tells the launcher it failed.
      .then(
        () => process.exit(0),
        (err: unknown) => {
          service.log.error({ err }, 'stopping the workers failed');
          process.exit(1);
        },
      );
  }
});
if (nice !== null) service.log.info({ nice }, 'the worker thread runs below the API');
post({ type: 'ready' });
