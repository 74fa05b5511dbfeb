import { describe, expect, it } from 'vitest';
import { isPrivateAddress } from '../../src/net/address-guard.js';

describe('isPrivateAddress', () => {
  const privateOnes = [
    ['127.0.0.1', 'IPv4 loopback'],
    ['127.255.0.9', 'anywhere in 127/8'],
    ['10.0.0.1', '10/8'],
    ['10.255.255.254', '10/8'],
    ['172.16.0.1', '172.16/12'],
    ['172.31.255.1', '172.16/12'],
    ['192.168.1.1', '192.168/16'],
    ['169.254.169.254', 'link-local, cloud metadata'],
    ['100.64.0.1', 'carrier-grade NAT 100.64/10'],
    ['100.127.255.254', 'carrier-grade NAT 100.64/10'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['::1', 'IPv6 loopback'],
    ['::', 'IPv6 unspecified'],
    ['fe80::1', 'IPv6 link-local'],
    ['fc00::1', 'IPv6 unique-local'],
    ['fd12:3456::1', 'IPv6 unique-local'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
    ['::ffff:10.1.2.3', 'IPv4-mapped private'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 of the metadata address'],
    ['2002:7f00:1::', '6to4 of loopback'],
    ['not-an-address', 'not an IP address at all'],
  ] as const;
  for (const [address, why] of privateOnes) {
    it(`${address} is private (${why})`, () => {
      expect(isPrivateAddress(address)).toBe(true);
    });
  }

  const publicOnes = [
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
  ];
  for (const address of publicOnes) {
    it(`${address} is public`, () => {
      expect(isPrivateAddress(address)).toBe(false);
    });
  }
});
