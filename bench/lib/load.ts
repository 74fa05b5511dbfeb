import { appendFileSync } from 'node:fs';
import { printMeasurements } from './report.js';
import type { BenchContext } from './suite.js';
import autocannon from 'autocannon';
import { assertLocal } from './http.js';
import { median } from './report.js';

/** One HTTP target to put under load with autocannon. */
export interface LoadTarget {
  name: string;
  /** Origin (and default path) the requests go to; 127.0.0.1 only. */
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Per-request setup (unique bodies, cycling paths); overrides url's path/method/body. */
  requests?: autocannon.RequestSpec[];
  /** Statuses that are not a failure; by default every 2xx and nothing else. */
  expectedStatuses?: number[];
}

export interface LoadOptions {
  /** Seconds the run lasts; with `amount`, only a bound on how long it may take. */
  durationS: number;
  connections: number;
  /** A fixed number of requests instead of a fixed duration (e.g. to seed data). */
  amount?: number;
  /**
   * Requests per second over all connections (autocannon's `overallRate`: each connection
   * sends its share as fast as it can at the start of every second, then waits).
   */
  overallRate?: number;
  /** Ends the run early (its figures cover the run so far); `durationS` stays the bound. */
  signal?: AbortSignal;
  /** Latencies are kept only while this answers true (statuses are always checked). */
  recordLatency?: () => boolean;
}

/** Figures of one run. Latencies count only responses with an expected status. */
export interface LoadFigures {
  /** Mean of the per-second request counts (autocannon's `requests.average`). */
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  total: number;
  non2xx: number;
  statusCounts: Record<string, number>;
  /**
   * performance.now() at the last response: autocannon reports a run of `amount` requests done
   * on its next tick, up to a second after the last answer.
   */
  lastResponseAt: number;
}

/** The median of each figure over several runs, with the runs themselves. */
export interface Measurement {
  name: string;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  runs: LoadFigures[];
}

/** A target measured against a baseline: `ratio` is its req/s relative to the baseline's. */
export interface ComparedMeasurement extends Measurement {
  ratio: number;
}

// autocannon's own histogram keeps whole milliseconds, too coarse for sub-millisecond routes;
// the float latencies of its 'response' events go into a bounded uniform sample instead.
const LATENCY_SAMPLE_MAX = 1_000_000;
const RUN_OVERRUN_MS = 60_000;

class LatencySample {
  private readonly values = new Float64Array(LATENCY_SAMPLE_MAX);
  private seen = 0;

  add(ms: number): void {
    if (this.seen < LATENCY_SAMPLE_MAX) {
      this.values[this.seen] = ms;
    } else {
      // Reservoir sampling (algorithm R): every response is kept with the same probability.
      const slot = Math.floor(Math.random() * (this.seen + 1));
      if (slot < LATENCY_SAMPLE_MAX) this.values[slot] = ms;
    }
    this.seen++;
  }

  /** Nearest-rank percentiles. */
  percentiles(...ps: number[]): number[] {
    const n = Math.min(this.seen, LATENCY_SAMPLE_MAX);
    if (n === 0) return ps.map(() => NaN);
    const sorted = this.values.slice(0, n).sort();
    return ps.map((p) => sorted[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))] ?? NaN);
  }
}

/**
 * BENCH_LATENCY_TRACE: a file every run appends its responses to (when each came, its
 * latency), to see when the slow ones came: a pause of the whole service (a garbage
 * collection, a database stall) shows as every connection's request slow at once.
 */
function latencyTraceFile(): string | null {
  return process.env.BENCH_LATENCY_TRACE || null;
}

function isExpected(target: LoadTarget, status: number): boolean {
  return target.expectedStatuses
    ? target.expectedStatuses.includes(status)
    : status >= 200 && status < 300;
}

/** One autocannon run of `target`; fails loudly on unexpected statuses, errors or timeouts. */
export async function runLoad(target: LoadTarget, opts: LoadOptions): Promise<LoadFigures> {
  assertLocal(target.url);
  const latencies = new LatencySample();
  let lastResponseAt = NaN;
  // autocannon ends runs itself (after `duration`, or `amount` requests); this bounds a run that hangs.
  const limitS = opts.durationS + (opts.amount !== undefined ? 0 : RUN_OVERRUN_MS / 1000);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    let settled = false;
    let stopRun: () => void = () => undefined;
    const guard = setTimeout(() => {
      if (settled) return;
      stopRun();
      reject(new Error(`${target.name}: the run did not end within ${limitS} s`));
    }, limitS * 1000);
    const instance = autocannon(
      {
        url: target.url,
        connections: opts.connections,
        duration: opts.durationS,
        ...(opts.amount !== undefined ? { amount: opts.amount } : {}),
        ...(opts.overallRate !== undefined ? { overallRate: opts.overallRate } : {}),
        timeout: 10,
        title: target.name,
        ...(target.method ? { method: target.method } : {}),
        ...(target.headers ? { headers: target.headers } : {}),
        ...(target.body !== undefined ? { body: target.body } : {}),
        ...(target.requests ? { requests: target.requests } : {}),
      },
      (err, res) => {
        settled = true;
        clearTimeout(guard);
        if (err) reject(err);
        else resolve(res);
      },
    );
    stopRun = () => instance.stop();
    if (opts.signal) {
      if (opts.signal.aborted) stopRun();
      else opts.signal.addEventListener('abort', stopRun, { once: true });
    }
    const keep = opts.recordLatency ?? (() => true);
    const startedAt = performance.now();
    const trace: string[] | null = latencyTraceFile() ? [] : null;
    if (trace) {
      instance.on('done', () => {
        const header = `# ${target.name}, ${opts.connections} connections: ms since the run began, latency ms`;
        appendFileSync(latencyTraceFile()!, `${header}\n${trace.join('\n')}\n`);
      });
    }
    instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
      lastResponseAt = performance.now();
      trace?.push(`${Math.round(lastResponseAt - startedAt)} ${responseTimeMs.toFixed(1)}`);
      if (isExpected(target, statusCode) && keep()) latencies.add(responseTimeMs);
    });
  });

  const statusCounts: Record<string, number> = {};
  let unexpected = 0;
  let total = 0;
  for (const [status, { count }] of Object.entries(result.statusCodeStats)) {
    statusCounts[status] = count;
    total += count;
    if (!isExpected(target, Number(status))) unexpected += count;
  }
  const short = opts.amount !== undefined && total !== opts.amount;
  if (unexpected > 0 || result.errors > 0 || result.timeouts > 0 || total === 0 || short) {
    throw new Error(
      `${target.name}: ${unexpected} unexpected responses, ${result.errors} errors, ` +
        `${result.timeouts} timeouts out of ${total} responses` +
        (opts.amount !== undefined ? ` (${opts.amount} requested)` : '') +
        `; statuses ${JSON.stringify(statusCounts)}` +
        (target.expectedStatuses
          ? ` (expected only ${target.expectedStatuses.join(', ')})`
          : ' (expected only 2xx)'),
    );
  }
  const [p50, p99] = latencies.percentiles(50, 99);
  return {
    reqPerSec: result.requests.average,
    p50Ms: p50 ?? NaN,
    p99Ms: p99 ?? NaN,
    total,
    non2xx: result.non2xx,
    statusCounts,
    lastResponseAt,
  };
}

/**
 * Measures the targets against the first (the baseline) and prints the table. Runs are
 * interleaved (every target once per round, the baseline first) so that a shared machine's
 * drift in speed over minutes hits the baseline and the targets alike; each target's ratio is
 * the median of its per-round ratios to the baseline.
 */
export async function measureAgainstBaseline(
  ctx: BenchContext,
  targets: LoadTarget[],
  /** Concurrent connections, when not BENCH_CONNECTIONS. */
  connections = ctx.settings.connections,
): Promise<ComparedMeasurement[]> {
  const settings = { ...ctx.settings, connections };
  const load = { durationS: settings.durationS, connections };
  if (settings.warmupS > 0) {
    for (const target of targets) {
      ctx.log(`warming up ${target.name} (${connections} connections)`);
      await runLoad(target, { durationS: settings.warmupS, connections });
    }
  }
  const runs: LoadFigures[][] = targets.map(() => []);
  for (let round = 1; round <= settings.runs; round++) {
    for (const [i, target] of targets.entries()) {
      const figures = await runLoad(target, load);
      ctx.log(
        `  ${target.name}  run ${round}/${settings.runs}: ${figures.reqPerSec.toFixed(0)} req/s, ` +
          `p50 ${figures.p50Ms.toFixed(2)} ms, p99 ${figures.p99Ms.toFixed(2)} ms, ${figures.total} responses`,
      );
      runs[i]!.push(figures);
    }
  }
  const baselineRuns = runs[0];
  if (!baselineRuns) throw new Error('no baseline measured');
  const results: ComparedMeasurement[] = targets.map((target, i) => {
    const own = runs[i]!;
    return {
      name: target.name,
      reqPerSec: median(own.map((r) => r.reqPerSec)),
      p50Ms: median(own.map((r) => r.p50Ms)),
      p99Ms: median(own.map((r) => r.p99Ms)),
      ratio: median(own.map((r, round) => r.reqPerSec / baselineRuns[round]!.reqPerSec)),
      runs: own,
    };
  });
  printMeasurements(ctx.log, settings, results);
  return results;
}
