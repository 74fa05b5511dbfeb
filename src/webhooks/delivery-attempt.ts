import type https from 'node:https';
import type { Clock } from '../clock.js';
import { guardedFetch, OutboundError } from '../net/guarded-fetch.js';
import { parseRetryAfter } from './retry-policy.js';
import { eventBody, serviceSignature, standardSignature } from './signing.js';

export const DELIVERY_TIMEOUT_MS = 10_000;

/** A delivery claimed for an attempt, with what its request is made of. */
export interface Claimed {
  account_id: string;
  webhook_id: string;
  event_id: string;
  attempts: number;
  url: string;
  secret: string;
  type: string;
  data: unknown;
  created_at: Date;
}

export type Outcome =
  | { kind: 'delivered'; statusCode: number }
  | {
      kind: 'failed';
      statusCode: number | null;
      error: string;
      retryAfterMs?: number;
      gone?: boolean;
    };

/**
 * One attempt at a delivery: the event signed over the exact bytes sent and POSTed to the
 * webhook's URL (no redirects followed, the answer's body discarded). `answered` is called as
 * soon as the receiver has answered or failed; the outcome comes with the attempt's duration.
 */
export async function sendAttempt(
  d: Claimed,
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
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Switchboard-Webhooks/1.0',
        'x-service-signature': serviceSignature(d.secret, body),
        'x-service-event-id': d.event_id,
        'x-service-delivery-attempt': String(d.attempts),
        'webhook-id': d.event_id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': standardSignature(d.secret, d.event_id, timestamp, body),
      },
      body,
      timeoutMs: DELIVERY_TIMEOUT_MS,
      maxBytes: 0,
      discardBody: true,
      maxRedirects: 0,
      allowPrivate: opts.allowPrivate,
      agent: opts.agent,
    });
    if (res.status >= 200 && res.status < 300)
      outcome = { kind: 'delivered', statusCode: res.status };
    else
      outcome = {
        kind: 'failed',
        statusCode: res.status,
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
    };
  }
  answered();
  return { outcome, durationMs: Math.round(performance.now() - t0) };
}
