import os from 'node:os';

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? NaN)
    : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
}

/** A plain-text table; the first column is left-aligned, the others right-aligned. */
export function formatTable(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((row) => (row[c] ?? '').length)));
  const line = (row: string[]) =>
    row
      .map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0)))
      .join('  ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(header), rule, ...rows.map(line)].join('\n');
}

export interface MachineInfo {
  nproc: number;
  cpu: string;
  node: string;
  platform: string;
  /** 1/5/15-minute load averages: anything else running skews the figures. */
  loadAvg: string;
}

export function machineInfo(): MachineInfo {
  return {
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    loadAvg: os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  };
}

/** Nearest-rank percentile (`p` in 0…100) of unsorted values; NaN when there are none. */
export function percentile(values: ArrayLike<number>, p: number): number {
  const n = values.length;
  if (n === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(n, Math.max(1, Math.ceil((p / 100) * n)));
  return sorted[rank - 1] ?? NaN;
}

/** 12345.6 → "12,346". */
export function fmtInt(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : 'n/a';
}

/** A figure with `digits` decimals, or "n/a". */
export function fmt(value: number, digits = 1): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

/** 0.43 → "0.43", 0.0047 → "0.0047": two decimals, or two significant digits below 0.1. */
function ratio(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= 0.1 || value === 0 ? value.toFixed(2) : value.toPrecision(2);
}

/**
 * The suites' table: req/s, p50, p99 and "x bare" (req/s relative to the bare Fastify route,
 * measured in the same run) for each target, and a line saying how they were measured.
 */
export function printMeasurements(
  log: (line: string) => void,
  settings: { runs: number; durationS: number; connections: number },
  results: Array<{ name: string; reqPerSec: number; p50Ms: number; p99Ms: number; ratio: number }>,
): void {
  const rows = results.map((r) => [
    r.name,
    r.reqPerSec.toFixed(0),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    ratio(r.ratio),
  ]);
  log('');
  log(formatTable(['target', 'req/s', 'p50 ms', 'p99 ms', 'x bare'], rows));
  log(
    `(medians of ${settings.runs} interleaved runs of ${settings.durationS} s, ${settings.connections} connections; ` +
      `x bare = median over the rounds of req/s relative to the bare Fastify route in the same round)`,
  );
}
