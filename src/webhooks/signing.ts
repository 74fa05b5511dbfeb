import { createHmac, randomBytes } from 'node:crypto';

/** `whsec_` + base64 of 32 random bytes, the Standard Webhooks form. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** X-Service-Signature: hex HMAC-SHA256 of the raw body, keyed with the secret string as issued. */
export function serviceSignature(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * Standard Webhooks `webhook-signature`: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`,
 * keyed with the base64-decoded part of the secret after `whsec_`.
 */
export function standardSignature(
  secret: string,
  messageId: string,
  timestampSeconds: number,
  body: Buffer,
): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const mac = createHmac('sha256', key)
    .update(`${messageId}.${timestampSeconds}.`)
    .update(body)
    .digest('base64');
  return `v1,${mac}`;
}

/**
 * The headers of a webhook delivery's POST: the two signatures over the exact bytes sent, the
 * event id, and the attempt's number (from 1). `switchboard listen` sends the same.
 */
export function deliveryHeaders(d: {
  secret: string;
  eventId: string;
  attempt: number;
  timestampSeconds: number;
  body: Buffer;
}): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'Switchboard-Webhooks/1.0',
    'x-service-signature': serviceSignature(d.secret, d.body),
    'x-service-event-id': d.eventId,
    'x-service-delivery-attempt': String(d.attempt),
    'webhook-id': d.eventId,
    'webhook-timestamp': String(d.timestampSeconds),
    'webhook-signature': standardSignature(d.secret, d.eventId, d.timestampSeconds, d.body),
  };
}

/** The exact bytes sent (and signed) for an event; the same on every retry. */
export function eventBody(event: {
  id: string;
  type: string;
  created_at: Date;
  data: unknown;
}): Buffer {
  return Buffer.from(
    JSON.stringify({
      id: event.id,
      event: event.type,
      timestamp: event.created_at.toISOString(),
      data: event.data,
    }),
  );
}
