import { createHmac, timingSafeEqual } from 'node:crypto';

const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

/**
 * True when `header` is `sha256=<hex HMAC-SHA256 of body keyed with secret>` (Meta's
 * X-Hub-Signature-256). Compared in constant time over the raw bytes, as received.
 */
export function isValidHubSignature(
  header: string | undefined,
  body: Buffer,
  secret: string,
): boolean {
  const m = header === undefined ? null : SIGNATURE.exec(header.trim());
  if (!m) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(Buffer.from(m[1]!, 'hex'), expected);
}

/** Two strings compared in constant time for their length (the verify token). */
export function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Meta's subscription handshake (`hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`): the
 * challenge to answer with when the verify token is the connection's; else null.
 */
export function hubChallenge(
  query: Readonly<Record<string, string | undefined>>,
  verifyToken: string,
): string | null {
  const token = query['hub.verify_token'];
  const challenge = query['hub.challenge'];
  if (
    query['hub.mode'] !== 'subscribe' ||
    token === undefined ||
    challenge === undefined ||
    !sameSecret(token, verifyToken)
  )
    return null;
  return challenge;
}

/** A setting the connection was made with (an id such as `page_id`); null when it has none. */
export function settingOf(
  settings: Readonly<Record<string, unknown>>,
  name: string,
): string | null {
  const v = settings[name];
  return typeof v === 'string' && v !== '' ? v : null;
}
