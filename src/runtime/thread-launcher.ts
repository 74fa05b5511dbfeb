import { Worker } from 'node:worker_threads';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Config } from '../config.js';
import { startThreadPool } from './thread-priority.js';

/** What the all-in-one service's worker thread is handed: the settings and the open store's. */
export interface WorkerThreadData {
  config: Omit<Config, 'secretsKey'>;
  /** The store's URLs (the embedded server's when DATABASE_URL is unset). */
  databaseUrl: string;
  databaseDirectUrl: string;
  /** The store's secrets key, hex (a Buffer arrives across threads as a bare Uint8Array). */
  secretsKeyHex: string;
}

export type WorkerMetrics = MetricObjectWithValues<MetricValue<string>>[];

/** Messages between the two threads. */
export type ToThread = { type: 'stop' } | { type: 'metrics'; id: number };
export type FromThread =
  { type: 'ready' } | { type: 'metrics'; id: number; metrics: WorkerMetrics };

/**
 * The thread's young generation, in MB (V8 gives it 48 on this heap): a broadcast allocates fast
 * and fills whatever it gets. At 16 a million recipients peaked at 259 MiB of RSS for the whole
 * process instead of 290–296, for twice the scavenges (about 3 % more of the thread's time in
 * them) and no measurable loss of rate (docs/performance.md).
 */
const YOUNG_GENERATION_MB = 16;

/** How long a scrape waits for the thread's counters before going without them. */
const METRICS_WAIT_MS = 2_000;

export interface WorkerThread {
  /**
   * The thread's own counters (webhook attempts, broadcast recipients, provider errors): the last
   * ones it sent when it does not answer within METRICS_WAIT_MS.
   */
  metrics(): Promise<WorkerMetrics>;
  /**
   * Stops taking jobs, lets claimed ones finish, releases the thread's connections; rejects if
   * that failed.
   */
  stop(): Promise<void>;
}

/** The thread's entry: the build's, or under tsx (`npm run dev`, the tests) the source. */
const ENTRY = new URL(
  import.meta.url.endsWith('.ts') ? '../worker-thread.ts' : '../worker-thread.js',
  import.meta.url,
);

/**
 * The thread on `entry`; a TypeScript one with tsx's loader registered in the thread first
 * (Node 20 does not carry a parent's `--import` hooks into its workers).
 */
function newWorker(entry: URL, workerData: WorkerThreadData): Worker {
  const options = { workerData, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } };
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(entry.href)}); });`;
  return new Worker(boot, { ...options, eval: true });
}

/**
 * Starts the background workers of an all-in-one service (`npm start`, `switchboard serve`) on a
 * thread of their own: a broadcast's batches then never queue the API's requests behind them on
 * one event loop, as a separate `switchboard worker` process would not. The thread shares the
 * open store (its own connection pool to the same database) and the settings. Resolves once the
 * thread runs; `onCrash` is told if it ends without being asked to.
 */
export function startWorkerThread(
  config: Config,
  store: { url: string; directUrl: string; secretsKey: Buffer },
  onCrash: (err: Error) => void,
  /** Another entry than worker-thread.ts (the launcher's tests). */
  entry: URL = ENTRY,
): Promise<WorkerThread> {
  const data: WorkerThreadData = {
    config: { ...config, secretsKey: undefined } as Omit<Config, 'secretsKey'>,
    databaseUrl: store.url,
    databaseDirectUrl: store.directUrl,
    secretsKeyHex: store.secretsKey.toString('hex'),
  };
  // Made by this thread, the pool's threads keep the API's priority (see lowerThreadPriority).
  startThreadPool();
  const worker = newWorker(entry, data);
  let stopping = false;
  let nextId = 0;
  const pending = new Map<number, (metrics: WorkerMetrics) => void>();
  // Counters only grow: a scrape the thread does not answer in time shows its last ones again
  // rather than none, which Prometheus would take for a reset.
  let last: WorkerMetrics = [];
  let stopped: ((err: Error | null) => void) | null = null;
  // The first thing that went wrong (an uncaught error, then its exit, is one failure).
  let failure: Error | null = null;
  let ended = false;

  return new Promise((resolve, reject) => {
    let started = false;
    const fail = (err: Error) => {
      if (failure) return;
      failure = err;
      if (!started) reject(err);
      else if (!stopping) onCrash(err);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      ended = true;
      for (const answer of pending.values()) answer(last);
      pending.clear();
      if (code !== 0) fail(new Error(`the worker thread ended (exit code ${code})`));
      else if (!stopping) fail(new Error('the worker thread ended (exit code 0)'));
      stopped?.(failure);
    });
    worker.on('message', (msg: FromThread) => {
      if (msg.type === 'ready') {
        started = true;
        resolve(handle);
      } else if (msg.type === 'metrics') {
        last = msg.metrics;
        pending.get(msg.id)?.(msg.metrics);
        pending.delete(msg.id);
      }
    });

    const handle: WorkerThread = {
      metrics: () =>
        new Promise((answer) => {
          if (stopping) return answer(last);
          const id = ++nextId;
          const timer = setTimeout(() => {
            pending.delete(id);
            answer(last);
          }, METRICS_WAIT_MS);
          pending.set(id, (metrics) => {
            clearTimeout(timer);
            answer(metrics);
          });
          worker.postMessage({ type: 'metrics', id } satisfies ToThread);
        }),
      stop: () => {
        if (stopping) return Promise.resolve();
        stopping = true;
        // Crashed already: nothing to stop, and onCrash was told.
        if (ended) return Promise.resolve();
        // Rejects when the thread's own stop failed (it then ends with exit code 1).
        return new Promise<void>((done, refuse) => {
          stopped = (err) => (err ? refuse(err) : done());
          worker.postMessage({ type: 'stop' } satisfies ToThread);
        });
      },
    };
  });
}
