import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

// Unit: DATABASE_URL through a pooler, and the direct way past it.

const SECRETS_KEY = randomBytes(32).toString('base64');
const POOLED = 'postgres://app@pgbouncer.internal:6432/switchboard';
const DIRECT = 'postgres://app@db.internal:5432/switchboard';

describe('DATABASE_DIRECT_URL', () => {
  it('without it, DATABASE_URL serves for everything, with prepared statements', () => {
    const config = loadConfig({ DATABASE_URL: DIRECT, SECRETS_KEY });
    expect(config.databaseDirectUrl).toBeNull();
    expect(config.databasePreparedStatements).toBe(true);
  });

  it('with it, DATABASE_URL is a pooler: no prepared statements unless asked for', () => {
    const config = loadConfig({ DATABASE_URL: POOLED, DATABASE_DIRECT_URL: DIRECT, SECRETS_KEY });
    expect(config.databaseDirectUrl).toBe(DIRECT);
    expect(config.databasePreparedStatements).toBe(false);
    // PgBouncer 1.21 and later keeps them in transaction mode.
    expect(
      loadConfig({
        DATABASE_URL: POOLED,
        DATABASE_DIRECT_URL: DIRECT,
        DATABASE_PREPARED_STATEMENTS: 'true',
        SECRETS_KEY,
      }).databasePreparedStatements,
    ).toBe(true);
  });

  it('is refused alone, and when it is not a PostgreSQL URL', () => {
    expect(() => loadConfig({ DATABASE_DIRECT_URL: DIRECT })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_DIRECT_URL: DIRECT })).toThrow(/set DATABASE_URL too/);
    expect(() =>
      loadConfig({ DATABASE_URL: POOLED, DATABASE_DIRECT_URL: 'mysql://db/x', SECRETS_KEY }),
    ).toThrow(/DATABASE_DIRECT_URL/);
  });
});
