/**
 * Benchmark harness: `npm run bench [-- suite...]` (or, after `npm run build`,
 * `npx tsx bench/run.ts [suite...]`). Runs the named suites (default: all, in registry order)
 * against the built service, started once for the run (again, on a fresh store, when a suite asks
 * for other service settings: `Suite.serviceEnv`); see bench/lib/settings.ts for the BENCH_*
 * environment variables.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { errMessage } from './lib/child.js';
import { startFakeGraph, type FakeGraph } from './lib/graph.js';
import { machineInfo } from './lib/report.js';
import { startService, type ServiceHandle } from './lib/service.js';
import { SettingsError, loadSettings } from './lib/settings.js';
import type { BenchContext } from './lib/suite.js';
import { suites } from './suites/index.js';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function usage(): string {
  return [
    'usage: tsx bench/run.ts [suite...]   (default: every suite)',
    '',
    'suites:',
    ...suites.map((s) => `  ${s.name.padEnd(12)} ${s.description}`),
    '',
    'environment: BENCH_DURATION (s per run, 10), BENCH_WARMUP (s, 3), BENCH_RUNS (3),',
    '  BENCH_CONNECTIONS (20), BENCH_DATABASE_URL (else embedded PostgreSQL in a temp dir; with it',
    '  the service gets SECRETS_KEY, else a fixed key of the harness)',
    '  BENCH_SERVICE_NODE_ARGS (extra node flags for the service only, e.g. --cpu-prof --cpu-prof-dir=DIR)',
    '  BENCH_SERVICE_OUTPUT (a file: every line the service and its workers print, timed, e.g. with --trace-gc)',
    'messages:   BENCH_MESSAGES_CONTACTS (1000), BENCH_CONVERSATION_MESSAGES (1000)',
    'webhooks:   BENCH_WEBHOOK_EVENTS (20000), BENCH_WEBHOOK_RATE (/s, 500), BENCH_WEBHOOK_SECONDS (20)',
    'broadcasts: BENCH_BROADCAST_CONTACTS (100000), BENCH_BROADCAST_READ_CONNECTIONS (10),',
    '  BENCH_BROADCAST_READ_RATE (/s, 0 = unthrottled); BROADCAST_BATCH_SIZE passes to the service',
    'both:       BENCH_WAIT_TIMEOUT (s, 900): bound on waiting for deliveries / the fan-out',
    'search:     BENCH_SEARCH_CONTACTS (1000000): contacts in the searched account',
    'whatsapp-*: BENCH_WHATSAPP_CONTACTS (100000): broadcast audience; BENCH_INBOUND_MESSAGES (10000),',
    '  BENCH_INBOUND_SENDERS (1000), BENCH_INBOUND_PER_WEBHOOK (1), BENCH_INBOUND_CONNECTIONS (20),',
    '  BENCH_SEND_CONNECTIONS (50): whatsapp-send measures again at this many connections',
    'streams:    BENCH_STREAMS (5000) widget streams held open, BENCH_STREAMS_RATE (replies/s, 200),',
    '  BENCH_STREAMS_SECONDS (10) per round of replies',
    'inbox:      BENCH_DATABASE_URL of the database bench/inbox/seed.ts filled (required),',
    '  BENCH_INBOX_CONNECTIONS (4) concurrent requests',
    'inbox-live: BENCH_LIVE_AGENTS (50) signed in with the event stream open, BENCH_LIVE_RATE',
    '  (inbound/s, 50), BENCH_LIVE_SECONDS (20) per round; the seeded account with BENCH_DATABASE_URL',
    'contacts-million, broadcast-million: BENCH_DATABASE_URL of the database bench/contacts/seed.ts',
    '  filled (required); BENCH_INBOX_CONNECTIONS as above; BENCH_BROADCAST_WORKERS (0): worker',
    '  processes beside an API-only service (0: the workers run inside the service);',
    '  BENCH_BROADCAST_TAG (subscribers: all 1,000,000) the broadcast-million audience;',
    "  BENCH_PG_WAITS=1: what the database's sessions wait on, before and during the broadcast",
    'BENCH_SERVICE_ROOT: run the service built in another checkout (e.g. an older commit; suites',
    '  measure what that build supports)',
    'BENCH_LATENCY_TRACE: a file each load run appends its responses to (ms since the run began,',
    '  latency ms): when the slow ones came',
  ].join('\n');
}

async function main(args: string[]): Promise<number> {
  if (args.includes('-h') || args.includes('--help')) {
    log(usage());
    return 0;
  }
  const unknown = args.filter((name) => !suites.some((s) => s.name === name));
  if (unknown.length > 0) {
    process.stderr.write(`unknown suite: ${unknown.join(', ')}\n\n${usage()}\n`);
    return 2;
  }
  const selected = args.length === 0 ? suites : suites.filter((s) => args.includes(s.name));

  let settings;
  try {
    settings = loadSettings();
  } catch (err) {
    if (err instanceof SettingsError) {
      process.stderr.write(`bench: ${err.message}\n`);
      return 2;
    }
    throw err;
  }

  const cleanups: Array<() => Promise<void>> = [];
  let cleaning: Promise<void> | undefined;
  /** Runs (last in, first out) the cleanups registered after the first `keep`. */
  const unwind = async (keep: number) => {
    while (cleanups.length > keep) {
      const fn = cleanups.pop();
      await fn?.().catch((err: unknown) =>
        process.stderr.write(`bench: cleanup failed: ${errMessage(err)}\n`),
      );
    }
  };
  const runCleanups = () => (cleaning ??= unwind(0));
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted = true;
    process.stderr.write(`\nbench: ${signal}; stopping the service and cleaning up\n`);
    void runCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const machine = machineInfo();
  log(`Switchboard benchmark  ${new Date().toISOString()}`);
  log(`machine: nproc ${machine.nproc}, ${machine.cpu}, ${machine.platform}`);
  log(`node: ${machine.node}; load average at start: ${machine.loadAvg}`);
  log(
    `load: autocannon, ${settings.connections} connections, ${settings.warmupS} s warm-up, ` +
      `${settings.runs} runs x ${settings.durationS} s per target (medians reported)`,
  );

  try {
    // Consecutive suites with the same serviceEnv share a service; another serviceEnv gets a
    // new one (and a fresh embedded store), so settings and background work never cross suites.
    let current = null as {
      key: string;
      service: ServiceHandle;
      graph: FakeGraph | null;
    } | null;
    for (const suite of selected) {
      const suiteEnv = suite.serviceEnv ?? {};
      const apiOnly = suite.apiOnly?.(settings) === true;
      const key = JSON.stringify([
        Object.entries(suiteEnv).sort(([a], [b]) => a.localeCompare(b)),
        suite.fakeGraph === true,
        apiOnly,
      ]);
      if (current?.key !== key) {
        if (current) {
          log('\nstopping the service: the next suite runs it with other settings');
          await current.service.stop();
          await current.graph?.stop();
        }
        // A fake Graph API first, when the suite needs one: the service is pointed at it, with
        // a throwaway key to seal the connections' secrets (never printed).
        let graph: FakeGraph | null = null;
        const extraEnv: Record<string, string> = { ...suiteEnv };
        if (suite.fakeGraph) {
          const startingGraph = startFakeGraph(projectRoot);
          cleanups.push(async () => (await startingGraph.catch(() => null))?.stop());
          graph = await startingGraph;
          extraEnv.META_GRAPH_URL = graph.url;
          extraEnv.SECRETS_KEY = randomBytes(32).toString('base64');
          log(`fake Graph API: bench/lib/graph-server.ts in its own process on ${graph.url}`);
        }
        const starting = startService({
          projectRoot: settings.serviceRoot ?? projectRoot,
          databaseUrl: settings.databaseUrl,
          log,
          extraEnv,
          apiOnly,
        });
        // Registered before the start completes, so that a signal during startup still stops it.
        cleanups.push(async () => (await starting.catch(() => null))?.stop());
        const service = await starting;
        const extra = Object.entries(extraEnv).map(
          ([name, value]) => `${name}=${name === 'SECRETS_KEY' ? '(random)' : value}`,
        );
        log(`database: ${service.database}`);
        log(
          `service: node ${settings.serviceRoot === null ? '' : `${settings.serviceRoot}/`}` +
            `${apiOnly ? 'dist/cli.js serve --no-workers' : 'dist/main.js'} ` +
            `on ${service.url} (LOG_LEVEL=warn, in-memory rate limiter` +
            `${extra.length > 0 ? `; ${extra.join(' ')}` : ''})`,
        );
        current = { key, service, graph };
      }

      const ctx: BenchContext = {
        projectRoot,
        settings,
        service: current.service,
        graph: current.graph,
        log,
        defer: (cleanup) => void cleanups.push(cleanup),
      };
      log(`\n== ${suite.name}: ${suite.description}`);
      // Each suite's section carries the machine and its load at that moment.
      const now = machineInfo();
      log(
        `machine: nproc ${now.nproc}, ${now.cpu}, ${now.platform}; node ${now.node}; ` +
          `load average now: ${now.loadAvg}`,
      );
      const suiteCleanups = cleanups.length;
      await suite.run(ctx);
      // The suite's own cleanups (servers, database clients) end with it, before the service.
      if (!interrupted) await unwind(suiteCleanups);
    }
    return 0;
  } catch (err) {
    // After a signal the service is being stopped under the load: that failure is expected.
    if (interrupted) return 130;
    process.stderr.write(
      `\nbench: failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return 1;
  } finally {
    await runCleanups();
  }
}

// Exit explicitly: keep-alive sockets or timers left by a failed run must not hold the process.
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench: ${errMessage(err)}\n`);
    process.exit(1);
  },
);
