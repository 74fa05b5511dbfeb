import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * How long a media link works. A provider fetches the file when it takes the message (each
 * attempt of a send signs a fresh link), and a widget page reads its messages again on every
 * load: an hour covers both and keeps a link that leaks short-lived.
 */
export const MEDIA_LINK_TTL_MS = 60 * 60_000;
/** Expiries are rounded up to this step, so links signed close together are the same URL (caches). */
const EXPIRY_STEP_S = 300;

export interface MediaLinkClaim {
  accountId: string;
  mediaId: string;
}

/**
 * Signed, unstored links to one of an account's files, for whoever cannot send an API key (a
 * provider fetching an attachment, a webchat visitor): `{PUBLIC_URL}/media/<account>/<media>/
 * <expires>.<mac>`, the expiry in Unix seconds and the MAC an HMAC-SHA256 (base64url) of account,
 * media and expiry under a key derived from SECRETS_KEY with its own HKDF label, so a link cannot
 * be made, moved to another file or account, or extended without the service's key. (Three path
 * segments: each stays under the router's 100-character limit on a parameter.)
 */
export class MediaLinks {
  private readonly key: Buffer;

  constructor(secretsKey: Buffer) {
    this.key = Buffer.from(
      hkdfSync('sha256', secretsKey, Buffer.alloc(0), 'switchboard media link v1', 32),
    );
  }

  /** The signature of a link good from `now` for MEDIA_LINK_TTL_MS (up to 5 minutes more). */
  sign(claim: MediaLinkClaim, now: Date): string {
    const expires =
      Math.ceil((now.getTime() + MEDIA_LINK_TTL_MS) / 1000 / EXPIRY_STEP_S) * EXPIRY_STEP_S;
    return this.signUntil(claim, expires);
  }

  /** The signature of a link that stops working at `expires` (Unix seconds). */
  signUntil(claim: MediaLinkClaim, expires: number): string {
    return `${expires}.${this.mac(claim, String(expires))}`;
  }

  /** `valid`, `expired` past its time, or `invalid` for anything not signed by us. */
  verify(claim: MediaLinkClaim, signature: string, now: Date): 'valid' | 'expired' | 'invalid' {
    const parts = signature.split('.');
    if (parts.length !== 2) return 'invalid';
    const [expires, mac] = parts as [string, string];
    if (!/^\d{1,12}$/.test(expires)) return 'invalid';
    const expected = Buffer.from(this.mac(claim, expires));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'invalid';
    return Number(expires) * 1000 <= now.getTime() ? 'expired' : 'valid';
  }

  private mac(claim: MediaLinkClaim, expires: string): string {
    return createHmac('sha256', this.key)
      .update(`${claim.accountId}\n${claim.mediaId}\n${expires}`)
      .digest('base64url');
  }
}
