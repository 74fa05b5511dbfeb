import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('TRUST_PROXY', () => {
  it('is off by default and with false', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).trustProxy).toBe(false);
  });

  it('takes a number of hops, or proxy addresses and CIDR ranges', () => {
    expect(loadConfig({ TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.4,::1,fd00::/8' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '192.168.1.4',
      '::1',
      'fd00::/8',
    ]);
  });

  it.each([
    'true',
    '0',
    '11',
    'proxy.example',
    '10.0.0.0/33',
    '::1/129',
    '10.0.0.1/8/2',
    '10.0.0.1,',
  ])('refuses %j with a clear error', (value) => {
    expect(() => loadConfig({ TRUST_PROXY: value })).toThrow(ConfigError);
  });
});
