import { assertLocal } from './http.js';
import { runLoad, type LoadFigures, type LoadTarget } from './load.js';
import { fmt, fmtInt, formatTable, median } from './report.js';
import type { BenchContext } from './suite.js';

/** One read measured for its latency against a target. */
export interface LatencyCase {
  name: string;
  /** The whole URL, 127.0.0.1 only. */
  url: string;
  headers: Record<string, string>;
  targetMs: number;
  /** What its first answer said (a list's total and rows), for the table. */
  shape: string;
}

/**
 * Each case under load for `settings.durationS` with `connections`, after a warm-up, in
 * `settings.runs` interleaved rounds (drift hits every case alike); prints each run and a table
 * of the medians with each case's target; answers whether every p99 met its target.
 */
export async function measureLatencyCases(
  ctx: BenchContext,
  cases: readonly LatencyCase[],
  connections: number,
): Promise<boolean> {
  const { settings } = ctx;
  const targets: LoadTarget[] = cases.map((c) => ({
    name: c.name,
    url: c.url,
    headers: c.headers,
    expectedStatuses: [200],
  }));
  const load = { durationS: settings.durationS, connections };
  if (settings.warmupS > 0) {
    for (const target of targets) {
      ctx.log(`warming up ${target.name}`);
      // A case slower than the warm-up answers nothing in it: not a failure yet.
      await runLoad(target, { durationS: settings.warmupS, connections }).catch((err: unknown) =>
        ctx.log(`  (warm-up: ${err instanceof Error ? err.message : String(err)})`),
      );
    }
  }
  const runs: LoadFigures[][] = targets.map(() => []);
  for (let round = 1; round <= settings.runs; round++) {
    for (const [i, target] of targets.entries()) {
      const f = await runLoad(target, load);
      ctx.log(
        `  ${target.name}  run ${round}/${settings.runs}: ${f.reqPerSec.toFixed(0)} req/s, ` +
          `p50 ${f.p50Ms.toFixed(2)} ms, p99 ${f.p99Ms.toFixed(2)} ms, ${f.total} responses`,
      );
      runs[i]!.push(f);
    }
  }
  let allMet = true;
  const rows = cases.map((c, i) => {
    const own = runs[i]!;
    const p99 = median(own.map((r) => r.p99Ms));
    allMet &&= p99 < c.targetMs;
    return [
      c.name,
      median(own.map((r) => r.reqPerSec)).toFixed(0),
      fmt(median(own.map((r) => r.p50Ms)), 2),
      fmt(p99, 2),
      own.map((r) => fmt(r.p99Ms, 1)).join(' / '),
      `< ${c.targetMs}`,
      p99 < c.targetMs ? 'yes' : 'NO',
      c.shape,
    ];
  });
  ctx.log('');
  ctx.log(
    formatTable(
      ['target', 'req/s', 'p50 ms', 'p99 ms', 'p99 of each run', 'target', 'met', 'answer'],
      rows,
    ),
  );
  ctx.log(
    `(medians of ${settings.runs} interleaved runs of ${settings.durationS} s, ${connections} ` +
      `connection${connections === 1 ? '' : 's'}; paths:`,
  );
  for (const c of cases) ctx.log(`  GET ${new URL(c.url).pathname}${new URL(c.url).search}`);
  ctx.log(')');
  return allMet;
}

/** GET with these headers (an API key or a session cookie), bounded by a minute. */
export async function getJson(url: string, headers: Record<string, string>) {
  assertLocal(url);
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(60_000) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // kept as text for the error message
  }
  return { status: res.status, body };
}

/** "total 41,000, 20 rows" for a list, "50 messages, has_more" for history, the counts as they are. */
export function describeAnswer(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const b = body as Record<string, unknown>;
  if (Array.isArray(b.data) && typeof b.total === 'number')
    return `total ${fmtInt(b.total)}, ${b.data.length} rows`;
  if (Array.isArray(b.data))
    return `${b.data.length} messages${b.has_more === true ? ', more' : ''}`;
  return JSON.stringify(b);
}
