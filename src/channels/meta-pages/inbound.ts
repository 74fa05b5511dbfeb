import type {
  ProviderInboundMessage,
  ProviderStatusReport,
  ProviderWatermark,
  ProviderWebhookContent,
} from '../webhook-content.js';
import {
  dateOfMillis,
  entriesOf,
  idOf,
  isObj,
  kindLabel,
  list,
  locationText,
  messagingOf,
  num,
  reactionText,
  str,
  type Obj,
} from '../meta/webhook-payload.js';
import type { PageChannel } from './requests.js';

/**
 * Messenger (`object: "page"`) and Instagram (`object: "instagram"`) webhooks in our words.
 * Both carry `entry[].messaging[]` events with a `sender`, a `recipient` and one of `message`,
 * `delivery`, `read`, `reaction`, `postback`… (developers.facebook.com/docs/messenger-platform/
 * reference/webhook-events and /docs/messenger-platform/instagram/features/webhook). The envelope
 * and field readers are Meta's (meta/webhook-payload.ts).
 *
 * Not mapped (nothing in our model to hold them): `standby` (another app owns the conversation
 * under the handover protocol), `referral`, `optin`, `message_edit`, `account_linking`, policy
 * notices, and the unsending of a message (`is_deleted`).
 */

export interface PageConnectionIds {
  channel: PageChannel;
  /**
   * What `entry[].id` may be for this connection: the Page id on Messenger; on Instagram the
   * professional account's id (Meta's Instagram webhook examples: `"id": "IGID", // ID of your
   * Instagram Professional account`) or the Page's (newer examples of Messenger API support for
   * Instagram: `"id": "{PAGE_ID}"`). The business's own ids: a sender that is one of them is an echo.
   */
  entryIds: readonly string[];
  /** Told of each entry skipped as another Page's or account's (its id, null when it has none). */
  skipped?: (entryId: string | null) => void;
}

const OBJECT: Record<PageChannel, string> = { messenger: 'page', instagram: 'instagram' };
const NAME: Record<PageChannel, string> = { messenger: 'Messenger', instagram: 'Instagram' };

export function parsePageWebhook(
  body: unknown,
  connection: PageConnectionIds,
): ProviderWebhookContent {
  const out = {
    messages: [] as ProviderInboundMessage[],
    statuses: [] as ProviderStatusReport[],
    templates: [],
    watermarks: [] as ProviderWatermark[],
  };
  for (const entry of entriesOf(body, OBJECT[connection.channel])) {
    // Another Page (or account) of the same app is another connection's business.
    const entryId = idOf(entry.id);
    if (entryId === null || !connection.entryIds.includes(entryId)) {
      connection.skipped?.(entryId);
      continue;
    }
    for (const event of messagingOf(entry)) {
      const sender = isObj(event.sender) ? idOf(event.sender.id) : null;
      // Our own messages come back with the business as the sender (echoes).
      if (!sender || connection.entryIds.includes(sender)) continue;
      const timestamp = num(event.timestamp);
      // When Meta says the person acted (ms): the 24-hour window opens then, not when we process it.
      const sentAt = dateOfMillis(timestamp);
      const said = (m: ProviderInboundMessage) => out.messages.push({ ...m, sentAt });
      if (isObj(event.message)) {
        toMessages(event.message, sender, connection.channel).forEach(said);
      } else if (isObj(event.reaction)) {
        const m = reaction(event.reaction, sender, timestamp);
        if (m) said(m);
      } else if (isObj(event.postback)) {
        const m = postback(event.postback, sender, timestamp);
        if (m) said(m);
      } else if (isObj(event.delivery)) {
        const mids = list(event.delivery.mids)
          .map(str)
          .filter((id): id is string => id !== null);
        for (const mid of mids)
          out.statuses.push({ providerMessageId: mid, status: 'delivered', reason: null });
        // Older Messenger clients report deliveries by watermark alone.
        const watermark = num(event.delivery.watermark);
        if (mids.length === 0 && watermark !== null)
          out.watermarks.push({
            identity: sender,
            status: 'delivered',
            upTo: { at: new Date(watermark) },
          });
      } else if (isObj(event.read)) {
        const mid = str(event.read.mid);
        const watermark = num(event.read.watermark);
        if (mid !== null)
          out.watermarks.push({
            identity: sender,
            status: 'read',
            upTo: { providerMessageId: mid },
          });
        else if (watermark !== null)
          out.watermarks.push({
            identity: sender,
            status: 'read',
            upTo: { at: new Date(watermark) },
          });
      }
    }
  }
  return out;
}

/** Attachment kinds kept as a file when they come with a URL (SPEC: image, else document). */
const TEXT_ONLY_KINDS = new Set(['fallback', 'location', 'template']);

/**
 * One Meta message as one or more of ours: its text (with what it answers), then each attachment.
 * The first keeps Meta's `mid` as its provider id; further attachments take `{mid}#{n}`, so that
 * each is recorded once however often Meta sends the webhook.
 */
function toMessages(m: Obj, sender: string, channel: PageChannel): ProviderInboundMessage[] {
  const mid = str(m.mid);
  // Without its id a message cannot be de-duplicated; echoes are our own; an unsent message
  // (Instagram's is_deleted) is no new message.
  if (!mid || m.is_echo === true || m.is_deleted === true) return [];
  const from = { identity: sender, name: null };
  const notes: string[] = [];
  if (isObj(m.reply_to)) {
    const story = isObj(m.reply_to.story) ? m.reply_to.story : null;
    if (story) notes.push(`[Replied to your story${urlPart(str(story.url))}]`);
  }
  const text = str(m.text);
  const content = [...notes, ...(text !== null ? [text] : [])].join('\n') || null;

  // Stickers come both as `sticker` and as `image` with the same URL while Meta changes them over:
  // one file, kept once.
  const seen = new Set<string>();
  const parts: ProviderInboundMessage[] = [];
  const attachments = list(m.attachments);
  // A shared Instagram post comes as a `share` and an `ig_post` attachment (Meta's transition
  // from November 2025), their URLs not always equal: one post, kept once, as the ig_post.
  const igPost = attachments.some((a) => isObj(a) && a.type === 'ig_post');
  for (const a of attachments) {
    if (!isObj(a)) continue;
    if (igPost && a.type === 'share') continue;
    const kind = (str(a.type) ?? 'file').slice(0, 40);
    const payload = isObj(a.payload) ? a.payload : {};
    const url = str(payload.url);
    if (url !== null) {
      if (seen.has(url)) continue;
      seen.add(url);
    }
    const id = parts.length === 0 ? mid : `${mid}#${parts.length}`;
    if (url !== null && !TEXT_ONLY_KINDS.has(kind) && /^https?:\/\//i.test(url)) {
      parts.push({
        providerMessageId: id,
        from,
        type: kind === 'image' ? 'image' : 'document',
        // A shared reel or post has a title: the nearest thing to a caption.
        content: str(payload.title),
        media: { url, mimeType: null, filename: null, kind },
      });
    } else {
      parts.push({
        providerMessageId: id,
        from,
        type: 'text',
        content: readableAttachment(kind, payload, channel),
        media: null,
      });
    }
  }
  if (parts.length === 0) {
    const said =
      content ??
      (m.is_unsupported === true
        ? `[Unsupported ${NAME[channel]} message]`
        : `[${NAME[channel]} message without content]`);
    return [{ providerMessageId: mid, from, type: 'text', content: said, media: null }];
  }
  // The text goes with the first attachment, as a caption (or before a text-only one).
  const first = parts[0]!;
  if (content !== null)
    parts[0] = {
      ...first,
      content: first.content === null ? content : `${content}\n${first.content}`,
    };
  return parts;
}

/** What a person reading the conversation needs of an attachment that is no file to keep. */
function readableAttachment(kind: string, payload: Obj, channel: PageChannel): string {
  const title = str(payload.title);
  const url = str(payload.url);
  if (kind === 'location') {
    const c = isObj(payload.coordinates) ? payload.coordinates : {};
    const where = locationText(title ?? '', num(c.lat), num(c.long));
    if (where) return where;
  }
  if (kind === 'fallback' && (title || url))
    return `Shared link: ${[title, url].filter(Boolean).join(' ')}`;
  const label = kindLabel(kind, 'attachment');
  const detail = [title, url].filter(Boolean).join(' ');
  return detail
    ? `[${NAME[channel]} ${label}: ${detail}]`
    : `[${NAME[channel]} ${label} without content]`;
}

function urlPart(url: string | null): string {
  return url ? `: ${url}` : '';
}

/**
 * A reaction (to one of our messages, or theirs): no message of its own in Meta's terms, so its
 * provider id is made from what identifies the event, which Meta repeats on every retry.
 */
function reaction(r: Obj, sender: string, timestamp: number | null): ProviderInboundMessage | null {
  const target = str(r.mid);
  if (!target || timestamp === null) return null;
  const action = str(r.action) === 'unreact' ? 'unreact' : 'react';
  const emoji = str(r.emoji) ?? str(r.reaction);
  return {
    providerMessageId: `reaction:${target}:${sender}:${action}:${timestamp}`,
    from: { identity: sender, name: null },
    type: 'text',
    content: reactionText(action === 'unreact', emoji),
    media: null,
  };
}

/** A tapped button (a postback, an ice breaker): the button's title is what the person said. */
function postback(p: Obj, sender: string, timestamp: number | null): ProviderInboundMessage | null {
  const mid = str(p.mid) ?? (timestamp !== null ? `postback:${sender}:${timestamp}` : null);
  if (!mid) return null;
  return {
    providerMessageId: mid,
    from: { identity: sender, name: null },
    type: 'text',
    content: str(p.title) ?? str(p.payload) ?? '[Button tapped]',
    media: null,
  };
}
