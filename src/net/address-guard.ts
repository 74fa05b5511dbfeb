import ipaddr from 'ipaddr.js';

const WELL_KNOWN_NAT64 = ipaddr.parseCIDR('64:ff9b::/96');
/** RFC 8215's local-use NAT64 prefix: the network's operator picks the layout inside it. */
const LOCAL_NAT64_LAYOUTS = [48, 56, 64, 96];

/**
 * True for addresses a user-supplied URL must never reach: loopback, private, link-local
 * (cloud metadata lives there), carrier-grade NAT, unique-local, multicast, reserved and
 * unspecified. An IPv6 address that carries an IPv4 address (IPv4-compatible, mapped,
 * translated, NAT64, 6to4, Teredo) is judged by the IPv4 address it leads to.
 */
export function isPrivateAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  const ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv4') return ip.range() !== 'unicast';
  const embedded = embeddedIPv4(ip as ipaddr.IPv6);
  if (embedded) return embedded.some((v4) => v4.range() !== 'unicast');
  return ip.range() !== 'unicast';
}

/**
 * The IPv4 addresses that traffic to an IPv6 address ends up at, where its prefix says it
 * carries one; null when it carries none. Every one of them must be public.
 */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4[] | null {
  const bytes = ip.toByteArray();
  const at = (offset: number) => new ipaddr.IPv4(bytes.slice(offset, offset + 4));
  const range = ip.range();
  // `::` and `::1` are refused as what they are (they would read as 0.0.0.0 and 0.0.0.1).
  if (range === 'unspecified' || range === 'loopback') return null;
  // ::ffff:0:0/96 and ::ffff:0:0:0/96.
  if (range === 'ipv4Mapped' || range === 'rfc6145') return [at(12)];
  if (range === 'rfc6052') {
    if (ip.match(WELL_KNOWN_NAT64)) return [at(12)];
    // 64:ff9b:1::/48 may hold the address after a /48, /56, /64 or /96 prefix, and a
    // translator reads it where its own prefix ends: every reading must be public.
    return LOCAL_NAT64_LAYOUTS.map((bits) => rfc6052Address(bytes, bits));
  }
  // 2002:AABB:CCDD::/48 is the site behind AA.BB.CC.DD.
  if (range === '6to4') return [at(2)];
  if (range === 'teredo') {
    // 2001:0:<server>:<flags>:<port ^ 0xffff>:<client ^ 0xffffffff>. A relay sends the
    // packets to the client's address; a genuine server is public too.
    const client = new ipaddr.IPv4(bytes.slice(12, 16).map((b) => b ^ 0xff));
    return [client, at(4)];
  }
  // IPv4-compatible (::/96, deprecated by RFC 4291 but still routed by some stacks).
  return bytes.slice(0, 12).every((b) => b === 0) ? [at(12)] : null;
}

/** RFC 6052 §2.2: the 32 bits after a `prefixBits` prefix, skipping bits 64–71. */
function rfc6052Address(bytes: number[], prefixBits: number): ipaddr.IPv4 {
  const octets: number[] = [];
  for (let i = prefixBits / 8; octets.length < 4; i++) if (i !== 8) octets.push(bytes[i]!);
  return new ipaddr.IPv4(octets);
}
