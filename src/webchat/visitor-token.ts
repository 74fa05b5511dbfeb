import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** Who a visitor token names, and the widget it was issued by. */
export interface VisitorClaim {
  accountId: string;
  visitorId: string;
  /** The connection's `widget_key` when the token was issued: a new connection has a new one. */
  widgetKey: string;
}

/**
 * How long a visitor token is good for after it was issued. The widget starts a session with
 * its token on every page load and keeps the fresh one it is given, so a visitor who comes back
 * within this time keeps their conversation; a token left unused that long stops working.
 */
export const VISITOR_TOKEN_TTL_MS = 30 * 24 * 3600_000;
/** A token issued this far ahead of our clock (another process's clock drifting) still counts. */
const CLOCK_SKEW_MS = 5 * 60_000;

/**
 * Visitor tokens are signed, not stored: `v1.<base64url JSON {a, v, k, t}>.<base64url
 * HMAC-SHA256>` under a key derived from SECRETS_KEY (HKDF, its own label), so a token cannot be
 * made or altered without the service's key. It names its account and the widget key it was
 * issued under (`k`): used with any other widget key (another account's, or a new one after
 * webchat was disconnected and connected again) it is refused, so a disconnect ends every token
 * of that connection. `t` is when it was issued (Unix seconds): past VISITOR_TOKEN_TTL_MS it is
 * refused. The visitor row it names holds what may change (the contact, the verified
 * identifier).
 */
export class VisitorTokens {
  private readonly key: Buffer;

  constructor(secretsKey: Buffer) {
    this.key = Buffer.from(
      hkdfSync('sha256', secretsKey, Buffer.alloc(0), 'switchboard webchat visitor token v1', 32),
    );
  }

  sign(claim: VisitorClaim, issuedAt: Date): string {
    const body = Buffer.from(
      JSON.stringify({
        a: claim.accountId,
        v: claim.visitorId,
        k: claim.widgetKey,
        t: Math.floor(issuedAt.getTime() / 1000),
      }),
    ).toString('base64url');
    return `v1.${body}.${this.mac(body)}`;
  }

  /** The claim of a genuine token still in date at `now`, or null for anything else. */
  verify(token: string, now: Date): VisitorClaim | null {
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
        k?: unknown;
        t?: unknown;
      };
      // A token from before tokens named their widget has no `k`: refused, like one of a
      // connection that is gone.
      if (typeof claim.a !== 'string' || typeof claim.v !== 'string' || typeof claim.k !== 'string')
        return null;
      // A token from before tokens were dated has no `t`: refused like an expired one.
      if (typeof claim.t !== 'number' || !Number.isFinite(claim.t)) return null;
      const age = now.getTime() - claim.t * 1000;
      if (age > VISITOR_TOKEN_TTL_MS || age < -CLOCK_SKEW_MS) return null;
      return { accountId: claim.a, visitorId: claim.v, widgetKey: claim.k };
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
