/** Harness settings, read once from the environment and validated (a bad value stops the run). */
export interface Settings {
  /** Seconds per measured run (BENCH_DURATION, default 10). */
  durationS: number;
  /** Seconds of warm-up before a target's measured runs (BENCH_WARMUP, default 3). */
  warmupS: number;
  /** Concurrent connections (BENCH_CONNECTIONS, default 20). */
  connections: number;
  /** Measured runs per target; the median of each figure is reported (BENCH_RUNS, default 3). */
  runs: number;
  /** External PostgreSQL for the service (BENCH_DATABASE_URL); embedded in a temp dir when null. */
  databaseUrl: string | null;
}

export class SettingsError extends Error {}

type Env = Record<string, string | undefined>;

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new SettingsError(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
  }
  return Number(raw);
}

export function loadSettings(env: Env = process.env): Settings {
  const databaseUrl = env.BENCH_DATABASE_URL || null;
  if (databaseUrl !== null) {
    let protocol: string;
    try {
      protocol = new URL(databaseUrl).protocol;
    } catch {
      throw new SettingsError('BENCH_DATABASE_URL is not a valid URL');
    }
    if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
      throw new SettingsError('BENCH_DATABASE_URL must start with postgres:// or postgresql://');
    }
  }
  return {
    durationS: readInt(env, 'BENCH_DURATION', 10, 1, 600),
    warmupS: readInt(env, 'BENCH_WARMUP', 3, 0, 600),
    connections: readInt(env, 'BENCH_CONNECTIONS', 20, 1, 1000),
    runs: readInt(env, 'BENCH_RUNS', 3, 1, 15),
    databaseUrl,
  };
}

/** The URL without its password, for printing. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}
