import ipaddr from 'ipaddr.js';

/**
 * True for addresses a user-supplied URL must never reach: loopback, private, link-local
 * (cloud metadata lives there), carrier-grade NAT, unique-local, multicast, reserved and
 * unspecified, including IPv4 addresses written as IPv6 (mapped, NAT64, 6to4, Teredo).
 */
export function isPrivateAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  let ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv6') {
    const v6 = ip as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) ip = v6.toIPv4Address();
    else {
      const range = v6.range();
      if (range === 'rfc6052' || range === '6to4' || range === 'teredo' || range === 'rfc6145')
        return true;
    }
  }
  return ip.range() !== 'unicast';
}
