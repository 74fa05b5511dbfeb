import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

// Unit: the settings of real channels, validated once at start (DESIGN §3, §4).

/** loadConfig's refusal of this environment: one line that names the variable. */
function refusal(env: Record<string, string>): string {
  let thrown: unknown;
  try {
    loadConfig(env);
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(ConfigError);
  const message = (thrown as ConfigError).message;
  expect(message).not.toContain('\n');
  return message;
}

describe('META_GRAPH_VERSION', () => {
  it.each(['23.0', 'v23', 'v23.0.1', 'latest', 'v23.0/', '../v23.0'])('refuses %j', (value) => {
    expect(refusal({ META_GRAPH_VERSION: value })).toBe(
      `META_GRAPH_VERSION must look like v23.0 (got "${value}")`,
    );
  });
  it('takes v23.0 by default, and another version when given', () => {
    expect(loadConfig({}).metaGraphVersion).toBe('v23.0');
    expect(loadConfig({ META_GRAPH_VERSION: 'v19.0' }).metaGraphVersion).toBe('v19.0');
  });
});

describe('META_GRAPH_URL', () => {
  it('refuses what is not a URL, and a URL that is not http(s)', () => {
    expect(refusal({ META_GRAPH_URL: 'graph.facebook.com' })).toBe(
      'META_GRAPH_URL is not a valid URL',
    );
    expect(refusal({ META_GRAPH_URL: 'ftp://graph.example' })).toBe(
      'META_GRAPH_URL must start with http:// or https://',
    );
  });
  it("is Meta's by default, without a trailing slash when given one", () => {
    expect(loadConfig({}).metaGraphUrl).toBe('https://graph.facebook.com');
    expect(loadConfig({ META_GRAPH_URL: 'http://127.0.0.1:9000/' }).metaGraphUrl).toBe(
      'http://127.0.0.1:9000',
    );
  });
});

describe('PUBLIC_URL', () => {
  it('refuses what is not a URL, and a URL that is not http(s)', () => {
    expect(refusal({ PUBLIC_URL: 'switchboard.example.com' })).toBe(
      'PUBLIC_URL is not a valid URL',
    );
    expect(refusal({ PUBLIC_URL: 'ws://switchboard.example.com' })).toBe(
      'PUBLIC_URL must start with http:// or https://',
    );
  });
  it('is http://{HOST}:{PORT} by default (IPv6 bracketed), without a trailing slash when given', () => {
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '8080' }).publicUrl).toBe('http://0.0.0.0:8080');
    expect(loadConfig({ HOST: '::1', PORT: '8080' }).publicUrl).toBe('http://[::1]:8080');
    expect(loadConfig({ PUBLIC_URL: 'https://sb.example.com/' }).publicUrl).toBe(
      'https://sb.example.com',
    );
  });
});

describe('SANDBOX_ENABLED', () => {
  it.each(['yes', 'no', 'TRUE', 'on', '2'])('refuses %j', (value) => {
    expect(refusal({ SANDBOX_ENABLED: value })).toBe(
      `SANDBOX_ENABLED must be true or false (got "${value}")`,
    );
  });
  it('is on by default; true/1 and false/0', () => {
    expect(loadConfig({}).sandboxEnabled).toBe(true);
    expect(loadConfig({ SANDBOX_ENABLED: 'false' }).sandboxEnabled).toBe(false);
    expect(loadConfig({ SANDBOX_ENABLED: '0' }).sandboxEnabled).toBe(false);
    expect(loadConfig({ SANDBOX_ENABLED: '1' }).sandboxEnabled).toBe(true);
  });
});

describe('SECRETS_KEY', () => {
  const said = 'SECRETS_KEY must be the base64 of 32 random bytes (openssl rand -base64 32)';
  it.each([
    ['too short', randomBytes(16).toString('base64')],
    ['too long', randomBytes(33).toString('base64')],
    ['hex, not base64', randomBytes(32).toString('hex')],
    ['base64url', 'A-_' + randomBytes(30).toString('base64url').slice(3)],
    ['not base64 at all', 'correct horse battery staple'],
  ])('refuses a key %s, without quoting it', (_, value) => {
    const message = refusal({ SECRETS_KEY: value });
    expect(message).toBe(said);
    expect(message).not.toContain(value);
  });
  it('takes the base64 of 32 bytes; none when unset (the embedded default generates one)', () => {
    const key = randomBytes(32);
    expect(loadConfig({ SECRETS_KEY: key.toString('base64') }).secretsKey).toEqual(key);
    expect(loadConfig({}).secretsKey).toBeNull();
  });
  it('is required with DATABASE_URL, in one line that says how to make one', () => {
    const url = 'postgres://sb@db.example/sb';
    for (const unset of [{}, { SECRETS_KEY: '' }] as Record<string, string>[]) {
      expect(refusal({ DATABASE_URL: url, ...unset })).toBe(
        'SECRETS_KEY is required with DATABASE_URL: webhook and connection secrets are stored encrypted under it (make one with openssl rand -base64 32, and keep it)',
      );
    }
    const key = randomBytes(32);
    expect(loadConfig({ DATABASE_URL: url, SECRETS_KEY: key.toString('base64') })).toMatchObject({
      databaseUrl: url,
      secretsKey: key,
    });
  });
});
