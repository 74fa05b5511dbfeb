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
    ['2001:db8::1', 'IPv6 documentation'],
    ['not-an-address', 'not an IP address at all'],
  ] as const;
  for (const [address, why] of privateOnes) {
    it(`${address} is private (${why})`, () => {
      expect(isPrivateAddress(address)).toBe(true);
    });
  }

  const publicOnes = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2001:4860:4860::8888'];
  for (const address of publicOnes) {
    it(`${address} is public`, () => {
      expect(isPrivateAddress(address)).toBe(false);
    });
  }
});

// Each IPv6 form that carries an IPv4 address, with what it carries: private inside is
// private, public inside is public.
describe('isPrivateAddress on IPv6 addresses that carry an IPv4 address', () => {
  const cases: [address: string, form: string, inside: string, isPrivate: boolean][] = [
    // IPv4-compatible, ::/96 (WHATWG URL writes [::169.254.169.254] as [::a9fe:a9fe]; ipaddr.js
    // reads the dotted form as mapped, so both spellings are here).
    ['::169.254.169.254', 'IPv4-compatible', '169.254.169.254', true],
    ['::a9fe:a9fe', 'IPv4-compatible', '169.254.169.254', true],
    ['::127.0.0.1', 'IPv4-compatible', '127.0.0.1', true],
    ['::7f00:1', 'IPv4-compatible', '127.0.0.1', true],
    ['::a00:1', 'IPv4-compatible', '10.0.0.1', true],
    ['::c0a8:101', 'IPv4-compatible', '192.168.1.1', true],
    ['::6440:1', 'IPv4-compatible', '100.64.0.1', true],
    ['::808:808', 'IPv4-compatible', '8.8.8.8', false],
    // IPv4-mapped, ::ffff:0:0/96.
    ['::ffff:127.0.0.1', 'IPv4-mapped', '127.0.0.1', true],
    ['::ffff:10.1.2.3', 'IPv4-mapped', '10.1.2.3', true],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped', '169.254.169.254', true],
    ['::ffff:0.0.0.0', 'IPv4-mapped', '0.0.0.0', true],
    ['::ffff:8.8.8.8', 'IPv4-mapped', '8.8.8.8', false],
    // IPv4-translated (RFC 6145), ::ffff:0:0:0/96.
    ['::ffff:0:a9fe:a9fe', 'IPv4-translated', '169.254.169.254', true],
    ['::ffff:0:7f00:1', 'IPv4-translated', '127.0.0.1', true],
    ['::ffff:0:808:808', 'IPv4-translated', '8.8.8.8', false],
    // NAT64 well-known prefix (RFC 6052), 64:ff9b::/96.
    ['64:ff9b::a9fe:a9fe', 'NAT64', '169.254.169.254', true],
    ['64:ff9b::7f00:1', 'NAT64', '127.0.0.1', true],
    ['64:ff9b::10.0.0.1', 'NAT64', '10.0.0.1', true],
    ['64:ff9b::808:808', 'NAT64', '8.8.8.8', false],
    ['64:ff9b::5db8:d70e', 'NAT64', '93.184.215.14', false],
    // NAT64 local-use prefix (RFC 8215), 64:ff9b:1::/48, read as /48, /56, /64 and /96.
    // Each private case is public in the three other readings.
    ['64:ff9b:1:c0a8:1:101:101:101', 'local NAT64 read as /48', '192.168.1.1', true],
    ['64:ff9b:1:80a:1:203:404:404', 'local NAT64 read as /56', '10.1.2.3', true],
    ['64:ff9b:1:808:7f:0:101:101', 'local NAT64 read as /64', '127.0.0.1', true],
    ['64:ff9b:1:808:8:808:a9fe:a9fe', 'local NAT64 read as /96', '169.254.169.254', true],
    ['64:ff9b:1::a9fe:a9fe', 'local NAT64 (0.0.0.0 read as /48)', '169.254.169.254', true],
    ['64:ff9b:1:808:8:808:808:808', 'local NAT64, every reading', '8.8.8.8', false],
    // 6to4 (RFC 3056), 2002::/16, the IPv4 address in bits 16-48.
    ['2002:7f00:1::', '6to4', '127.0.0.1', true],
    ['2002:a9fe:a9fe::1', '6to4', '169.254.169.254', true],
    ['2002:a00:1:1::1', '6to4', '10.0.0.1', true],
    ['2002:808:808::1', '6to4', '8.8.8.8', false],
    // Teredo (RFC 4380), 2001::/32: server in bits 32-64, client in the last 32 bits, inverted.
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'Teredo client', '127.0.0.1', true],
    ['2001:0:4136:e378:8000:63bf:5601:5601', 'Teredo client', '169.254.169.254', true],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', 'Teredo client', '10.0.0.1', true],
    ['2001:0:a00:1:8000:63bf:f7f7:f7f7', 'Teredo server', '10.0.0.1', true],
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', 'Teredo client', '8.8.8.8', false],
  ];
  it.each(cases)('%s (%s of %s): private %s', (address, _form, _inside, isPrivate) => {
    expect(isPrivateAddress(address)).toBe(isPrivate);
  });

  it('judges a URL host as WHATWG URL writes it', () => {
    for (const raw of ['https://[::169.254.169.254]/x', 'https://[::127.0.0.1]/x']) {
      const host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
      expect(host).toMatch(/^::[0-9a-f]+:[0-9a-f]+$/);
      expect(isPrivateAddress(host)).toBe(true);
    }
  });
});
