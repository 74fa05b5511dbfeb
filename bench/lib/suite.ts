import type { FakeGraph } from './graph.js';
import type { ServiceHandle } from './service.js';
import type { Settings } from './settings.js';

/** What every suite gets from bench/run.ts. */
export interface BenchContext {
  /** The repository root (where dist/ and node_modules/ are). */
  projectRoot: string;
  settings: Settings;
  /**
   * The built service; suites create their own accounts. Consecutive suites with the same
   * `serviceEnv` (or none) share one; see `Suite.serviceEnv`.
   */
  service: ServiceHandle;
  /** The fake Graph API the service is pointed at (META_GRAPH_URL), for suites with `fakeGraph`. */
  graph: FakeGraph | null;
  /** Prints a line of the report. */
  log: (line: string) => void;
  /** Registers a cleanup run when the suite ends, on errors and signals too (last in, first out). */
  defer: (cleanup: () => Promise<void>) => void;
}

/** A benchmark suite: registered in bench/suites/index.ts, prints its own figures. */
export interface Suite {
  name: string;
  description: string;
  /**
   * Extra environment for the service (e.g. SANDBOX_AUTO_ADVANCE=false). When it differs from
   * the previous suite's, bench/run.ts stops that service and starts a new one with it (a fresh
   * embedded store), so that settings and leftover background work never cross suites.
   */
  serviceEnv?: Readonly<Record<string, string>>;
  /**
   * The service talks to a fake Graph API (bench/lib/graph.ts), started before it in its own
   * process, with META_GRAPH_URL and a random SECRETS_KEY; consecutive such suites share both.
   */
  fakeGraph?: boolean;
  /**
   * True when the service should run its API only (`serve --no-workers`, with DATABASE_URL):
   * the suite then starts the workers it wants with `ServiceHandle.startWorker`.
   */
  apiOnly?: (settings: Settings) => boolean;
  run(ctx: BenchContext): Promise<void>;
}
