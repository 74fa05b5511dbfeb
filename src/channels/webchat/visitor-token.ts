import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** Who a visitor token names. */
export interface VisitorClaim {
  accountId: string;
  visitorId: string;
}

/**
 * Visitor tokens are signed, not stored: `v1.<base64url JSON {a, v}>.<base64url HMAC-SHA256>`
 * under a key derived from SECRETS_KEY (HKDF, its own label), so a token cannot be made or
 * altered without the service's key, and it names its account: used with another account's
 * widget key it is refused. The visitor row it names holds what may change (the contact, the
 * verified identifier).
 */
export class VisitorTokens {
  private readonly key: Buffer;

  constructor(secretsKey: Buffer) {
    this.key = Buffer.from(
      hkdfSync('sha256', secretsKey, Buffer.alloc(0), 'switchboard webchat visitor token v1', 32),
    );
  }

  sign(claim: VisitorClaim): string {
    const body = Buffer.from(JSON.stringify({ a: claim.accountId, v: claim.visitorId })).toString(
      'base64url',
    );
    return `v1.${body}.${this.mac(body)}`;
  }

  /** The claim of a genuine token, or null for anything else. */
  verify(token: string): VisitorClaim | null {
    const parts = token.split('.');
    if (parts.length !== 3 || parts[0] !== 'v1') return null;
    const [, body, mac] = parts as [string, string, string];
    const expected = Buffer.from(this.mac(body));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    try {
      const claim = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as {
        a?: unknown;
        v?: unknown;
      };
      if (typeof claim.a !== 'string' || typeof claim.v !== 'string') return null;
      return { accountId: claim.a, visitorId: claim.v };
    } catch {
      return null;
    }
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(`v1.${body}`).digest('base64url');
  }
}

/** Whether `hash` is the hex HMAC-SHA256 of `identifier` keyed with `secret`, in constant time. */
export function identifierHashMatches(secret: string, identifier: string, hash: string): boolean {
  const expected = Buffer.from(createHmac('sha256', secret).update(identifier).digest('hex'));
  const given = Buffer.from(hash.toLowerCase());
  return given.length === expected.length && timingSafeEqual(given, expected);
}
