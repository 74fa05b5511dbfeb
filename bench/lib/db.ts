import pg from 'pg';

/**
 * A small pool on the service's database, for suites that seed or inspect rows directly.
 * Every query is bounded; the caller ends it (`end()`), before the service stops.
 */
export function openPool(url: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: 4,
    connectionTimeoutMillis: 10_000,
    statement_timeout: 600_000,
    application_name: 'switchboard-bench',
  });
  // An idle client losing its connection (the server stopping) must not crash the harness.
  pool.on('error', () => undefined);
  return pool;
}
