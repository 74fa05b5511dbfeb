import { randomBytes } from 'node:crypto';
import { webhookNow } from './webhooks.js';

/**
 * Messenger (`object: "page"`) and Instagram (`object: "instagram"`) webhook payloads, shaped
 * after Meta's published examples:
 * - developers.facebook.com/docs/messenger-platform/reference/webhook-events/messages (text,
 *   `quick_reply`, `reply_to`, attachments `{ type, payload: { url } }`, the entry envelope
 *   `{ id, time, messaging: [...] }`), …/message-echoes (`is_echo`, `app_id`),
 *   …/message-deliveries (`delivery: { mids, watermark }`), …/message-reads
 *   (`read: { watermark }`), …/message-reactions (`reaction: { reaction, emoji, action, mid }`);
 * - developers.facebook.com/docs/messenger-platform/instagram/features/webhook and
 *   /docs/instagram-platform/webhooks/examples (`object: "instagram"`, `entry.id` the Instagram
 *   professional account id, `messaging_seen` as `read: { mid }`, story replies as
 *   `reply_to: { story: { url, id } }`, `story_mention` and `share` attachments, `is_deleted`,
 *   `is_unsupported`, reactions).
 * Post them with `postSignedWebhook` from ./webhooks.js.
 */

type Json = Record<string, unknown>;

/** A Messenger-like message id: `m_` and an opaque string. */
export function mid(): string {
  return `m_${randomBytes(30).toString('base64url')}`;
}

/** A page- or Instagram-scoped id: digits, as Meta issues them. */
export function scopedId(): string {
  return String(1_000_000_000_000_000n + BigInt(Math.floor(Math.random() * 1e15)));
}

/** `{ object, entry: [{ id, time, messaging }] }` for one Page (Messenger) or IG account. */
export function pageWebhook(
  object: 'page' | 'instagram',
  entryId: string,
  ...messaging: Json[]
): Json {
  return { object, entry: [{ id: entryId, time: webhookNow(), messaging }] };
}

/** One `messaging[]` event from a person to the business. */
export function fromPerson(sender: string, business: string, event: Json, at = webhookNow()): Json {
  return { sender: { id: sender }, recipient: { id: business }, timestamp: at, ...event };
}

export const pageEvent = {
  text: (text: string, id = mid()): Json => ({ message: { mid: id, text } }),
  quickReply: (text: string, payload: string, id = mid()): Json => ({
    message: { mid: id, text, quick_reply: { payload } },
  }),
  replyTo: (text: string, replied: string, id = mid()): Json => ({
    message: { mid: id, text, reply_to: { mid: replied, is_self_reply: false } },
  }),
  attachments: (
    parts: Array<{ type: string; payload: Json }>,
    id = mid(),
    text?: string,
  ): Json => ({
    message: { mid: id, ...(text !== undefined ? { text } : {}), attachments: parts },
  }),
  /** What Meta sends back for a message the business sent (ignored). */
  echo: (text: string, id = mid()): Json => ({
    message: { mid: id, is_echo: true, app_id: 1517776481860111, text },
  }),
  delivery: (mids: string[] | undefined, watermark: number): Json => ({
    delivery: { ...(mids ? { mids } : {}), watermark },
  }),
  readWatermark: (watermark: number): Json => ({ read: { watermark } }),
  readMid: (id: string): Json => ({ read: { mid: id } }),
  reaction: (target: string, emoji: string, action: 'react' | 'unreact' = 'react'): Json => ({
    reaction:
      action === 'react'
        ? { mid: target, action, reaction: 'love', emoji }
        : { mid: target, action },
  }),
  storyReply: (text: string, storyUrl: string, id = mid()): Json => ({
    message: { mid: id, text, reply_to: { story: { url: storyUrl, id: '17887498072083520' } } },
  }),
  unsupported: (id = mid()): Json => ({ message: { mid: id, is_unsupported: true } }),
  deleted: (id: string): Json => ({ message: { mid: id, is_deleted: true } }),
  postback: (title: string, payload: string, id = mid()): Json => ({
    postback: { mid: id, title, payload },
  }),
};
