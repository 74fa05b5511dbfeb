import type { OutboundMessage } from '../channel.js';

/** The two Meta channels that send through a Facebook Page's Send API. */
export type PageChannel = 'messenger' | 'instagram';

const WHO: Record<PageChannel, string> = {
  messenger: 'Messenger id (PSID) on this page',
  instagram: 'Instagram id (IGSID) on this account',
};

/**
 * The JSON bodies of `POST /{version}/{page_id}/messages` for one of our messages, exactly as
 * DESIGN §4 writes them (key order included, so the bytes are stable), or why it cannot be sent.
 *
 * Meta's attachments carry no caption, so an image or document with content is two requests:
 * the attachment (whose `message_id` names our message) and then its caption as text.
 */
export type PageRequests =
  | { ok: true; main: Record<string, unknown>; caption: Record<string, unknown> | null }
  | { ok: false; reason: string };

export function buildPageRequests(channel: PageChannel, m: OutboundMessage): PageRequests {
  const id = m.to.identity;
  if (!id)
    return {
      ok: false,
      reason: `the contact has no ${WHO[channel]}: they must write to the business first`,
    };
  const body = (message: Record<string, unknown>) => ({
    recipient: { id },
    // Every message we send answers a person who wrote within the 24-hour window.
    messaging_type: 'RESPONSE',
    message,
  });
  const text = m.content !== null && m.content !== '' ? m.content : null;
  switch (m.type) {
    case 'text':
    case 'template':
      // Meta has no approved templates on these channels: a template goes as its rendered text.
      if (text === null) return { ok: false, reason: `a ${m.type} message needs its text` };
      return { ok: true, main: body({ text }), caption: null };
    case 'image':
    case 'document': {
      if (!m.media)
        return {
          ok: false,
          reason: `${m.type === 'image' ? 'an image' : 'a document'} message needs a media URL`,
        };
      const attachment = {
        type: m.type === 'image' ? 'image' : 'file',
        payload: { url: m.media.url },
      };
      return {
        ok: true,
        main: body({ attachment }),
        caption: text === null ? null : body({ text }),
      };
    }
  }
}
