import type https from 'node:https';
import type { Clock } from '../clock.js';
import { guardedFetch, OutboundError } from '../net/guarded-fetch.js';
import { parseRetryAfter } from './retry-policy.js';
import { deliveryHeaders, eventBody } from './signing.js';

export const DELIVERY_TIMEOUT_MS = 10_000;
/** The delivery log keeps at most this many characters of a receiver's answer. */
export const RESPONSE_EXCERPT_CHARS = 500;

/**
 * The start of a receiver's answer as the log shows it: at most RESPONSE_EXCERPT_CHARS
 * characters (a character cut in two at the end is dropped), without NUL (which PostgreSQL text
 * cannot hold), and with the webhook's secret blanked should a receiver echo it. Null when the
 * answer had no body.
 */
export function responseExcerpt(body: Buffer, secret: string): string | null {
  let text = new TextDecoder('utf-8').decode(body, { stream: true });
  text = [...text]
    .slice(0, RESPONSE_EXCERPT_CHARS)
    .join('')
    .replace(/\u0000/g, '');
  if (secret) text = text.split(secret).join('[secret]');
  return text === '' ? null : text;
}

/** A delivery claimed for an attempt, with what its request is made of. */
export interface Claimed {
  account_id: string;
  webhook_id: string;
  event_id: string;
  attempts: number;
  url: string;
  /** The webhook's signing secret, sealed (see WebhookSecrets). */
  secret_box: Buffer;
  type: string;
  data: unknown;
  created_at: Date;
}

export type Outcome =
  | { kind: 'delivered'; statusCode: number; excerpt: string | null }
  | {
      kind: 'failed';
      statusCode: number | null;
      error: string;
      excerpt: string | null;
      retryAfterMs?: number;
      gone?: boolean;
    };

/**
 * One attempt at a delivery: the event signed with `secret` (the webhook's, opened) over the
 * exact bytes sent and POSTed to the webhook's URL (no redirects followed; of the answer's body,
 * only the start is kept for the log). `answered` is called as soon as the receiver has answered
 * or failed; the outcome comes with the attempt's duration.
 */
export async function sendAttempt(
  d: Claimed,
  secret: string,
  opts: { clock: Clock; allowPrivate: boolean; agent: https.Agent },
  answered: () => void,
): Promise<{ outcome: Outcome; durationMs: number }> {
  const body = eventBody({
    id: d.event_id,
    type: d.type,
    created_at: new Date(d.created_at),
    data: d.data,
  });
  const started = opts.clock.now();
  const timestamp = Math.floor(started.getTime() / 1000);
  const t0 = performance.now();
  let outcome: Outcome;
  try {
    const res = await guardedFetch({
      url: d.url,
      method: 'POST',
      headers: deliveryHeaders({
        secret,
        eventId: d.event_id,
        attempt: d.attempts,
        timestampSeconds: timestamp,
        body,
      }),
      body,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      maxBytes: 0,
      discardBody: true,
      // Four bytes a character at most: enough for RESPONSE_EXCERPT_CHARS of any text.
      keepBytes: RESPONSE_EXCERPT_CHARS * 4,
      maxRedirects: 0,
      allowPrivate: opts.allowPrivate,
      agent: opts.agent,
    });
    const excerpt = responseExcerpt(res.body, secret);
    if (res.status >= 200 && res.status < 300)
      outcome = { kind: 'delivered', statusCode: res.status, excerpt };
    else
      outcome = {
        kind: 'failed',
        statusCode: res.status,
        excerpt,
        error:
          res.status >= 300 && res.status < 400
            ? `redirect (${res.status}) not followed`
            : `HTTP ${res.status}`,
        retryAfterMs: parseRetryAfter(res.headers['retry-after'], started),
        gone: res.status === 410,
      };
  } catch (err) {
    outcome = {
      kind: 'failed',
      statusCode: null,
      error: err instanceof OutboundError ? err.message : 'network error',
      excerpt: null,
    };
  }
  answered();
  return { outcome, durationMs: Math.round(performance.now() - t0) };
}
