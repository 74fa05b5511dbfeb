import type { ServiceHandle } from './service.js';
import type { Settings } from './settings.js';

/** What every suite gets from bench/run.ts. */
export interface BenchContext {
  /** The repository root (where dist/ and node_modules/ are). */
  projectRoot: string;
  settings: Settings;
  /** The built service, started once for the whole run; suites create their own accounts. */
  service: ServiceHandle;
  /** Prints a line of the report. */
  log: (line: string) => void;
  /** Registers a cleanup run at the end of the whole run, on errors and signals too (last in, first out). */
  defer: (cleanup: () => Promise<void>) => void;
}

/** A benchmark suite: registered in bench/suites/index.ts, prints its own figures. */
export interface Suite {
  name: string;
  description: string;
  run(ctx: BenchContext): Promise<void>;
}
