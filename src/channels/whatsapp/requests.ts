import type { OutboundMessage } from '../channel.js';

/**
 * The JSON body of `POST /{version}/{phone_number_id}/messages` for one of our messages, exactly
 * as DESIGN §4 writes it (key order included, so the bytes are stable), or the reason the
 * message cannot be sent on WhatsApp at all.
 */
export type WhatsAppRequest =
  { ok: true; body: Record<string, unknown> } | { ok: false; reason: string };

export function buildWhatsAppRequest(m: OutboundMessage): WhatsAppRequest {
  if (!m.to.phone)
    return { ok: false, reason: 'the contact has no phone number to reach on WhatsApp' };
  const head = {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    // Cloud API addresses are E.164 digits without the `+`.
    to: m.to.phone.replace(/^\+/, ''),
    type: m.type,
  };
  const caption = m.content !== null && m.content !== '' ? { caption: m.content } : {};
  switch (m.type) {
    case 'text':
      if (m.content === null || m.content === '')
        return { ok: false, reason: 'a text message needs content' };
      return { ok: true, body: { ...head, text: { body: m.content, preview_url: false } } };
    case 'template': {
      if (!m.template) return { ok: false, reason: 'a template message needs its template' };
      const { name, language, params } = m.template;
      const template: Record<string, unknown> = { name, language: { code: language } };
      // Meta refuses a body component without parameters, so it is left out when there are none.
      if (params.length > 0)
        template.components = [
          { type: 'body', parameters: params.map((text) => ({ type: 'text', text })) },
        ];
      return { ok: true, body: { ...head, template } };
    }
    case 'image':
      if (!m.media) return { ok: false, reason: 'an image message needs a media URL' };
      return { ok: true, body: { ...head, image: { link: m.media.url, ...caption } } };
    case 'document': {
      if (!m.media) return { ok: false, reason: 'a document message needs a media URL' };
      const filename = m.media.filename ? { filename: m.media.filename } : {};
      return {
        ok: true,
        body: { ...head, document: { link: m.media.url, ...caption, ...filename } },
      };
    }
  }
}
