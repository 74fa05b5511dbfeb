import type {
  ProviderInboundMessage,
  ProviderStatusReport,
  ProviderWebhookContent,
  TemplateStatusReport,
} from '../webhook-content.js';
import {
  changesOf,
  dateOfSeconds,
  entriesOf,
  idOf,
  isObj,
  kindLabel,
  list,
  locationText,
  numeric,
  reactionText,
  str,
  type Obj,
} from '../meta/webhook-payload.js';
import { templateReasonOf, templateStatusOfEvent } from './templates.js';

/**
 * WhatsApp Cloud API webhooks (`object: "whatsapp_business_account"`) in our words (the envelope
 * and field readers are Meta's, see meta/webhook-payload.ts).
 */

/** What identifies the connection in Meta's payloads. */
export interface WhatsAppConnectionIds {
  phoneNumberId: string;
  /** The WhatsApp Business Account id: template reviews name it, not the phone number. */
  businessAccountId: string | null;
}

export function parseWhatsAppWebhook(
  body: unknown,
  connection: WhatsAppConnectionIds,
): ProviderWebhookContent {
  const out: ProviderWebhookContent = { messages: [], statuses: [], templates: [] };
  for (const entry of entriesOf(body, 'whatsapp_business_account')) {
    for (const { field, value } of changesOf(entry)) {
      if (field === 'messages') {
        // Another number of the same business (or app) is another connection's business.
        const metadata = isObj(value.metadata) ? value.metadata : {};
        if (idOf(metadata.phone_number_id) !== connection.phoneNumberId) continue;
        const names = profileNames(value.contacts);
        for (const m of list(value.messages)) {
          const message = toMessage(m, names);
          if (message) out.messages.push(message);
        }
        for (const s of list(value.statuses)) {
          const status = toStatus(s);
          if (status) out.statuses.push(status);
        }
      } else if (field === 'message_template_status_update') {
        if (
          connection.businessAccountId === null ||
          idOf(entry.id) !== connection.businessAccountId
        )
          continue;
        const template = toTemplateStatus(value);
        if (template) out.templates.push(template);
      }
    }
  }
  return out;
}

/** wa_id → profile name, from `value.contacts[]`. */
function profileNames(contacts: unknown): Map<string, string> {
  const names = new Map<string, string>();
  for (const c of list(contacts)) {
    if (!isObj(c)) continue;
    const waId = idOf(c.wa_id);
    const name = isObj(c.profile) ? str(c.profile.name) : null;
    if (waId && name) names.set(waId, name.trim().slice(0, 200));
  }
  return names;
}

const MEDIA_KINDS = ['image', 'document', 'audio', 'video', 'sticker'] as const;

function toMessage(m: unknown, names: Map<string, string>): ProviderInboundMessage | null {
  if (!isObj(m)) return null;
  const id = str(m.id);
  const from = idOf(m.from);
  // Without its id a message cannot be de-duplicated, and without a sender it has no contact.
  if (!id || !from || !/^\d{1,20}$/.test(from)) return null;
  // Meta may name the sender differently in `contacts` (a country's old number format), so a
  // lone profile is the sender's.
  const name = names.get(from) ?? (names.size === 1 ? [...names.values()][0]! : null);
  // When the person sent it (the 24-hour window opens then).
  const sentAt = dateOfSeconds(m.timestamp);
  const base = { providerMessageId: id, from: { phone: `+${from}`, name }, sentAt };
  const type = str(m.type) ?? 'unknown';

  if (type === 'text') {
    const body = isObj(m.text) ? str(m.text.body) : null;
    return { ...base, type: 'text', content: body ?? placeholder('text', m), media: null };
  }
  if ((MEDIA_KINDS as readonly string[]).includes(type)) {
    const part = m[type];
    const media = isObj(part) ? part : {};
    const mediaId = idOf(media.id);
    if (!mediaId) return { ...base, type: 'text', content: placeholder(type, m), media: null };
    return {
      ...base,
      // SPEC has image and document; the other kinds are kept as documents.
      type: type === 'image' ? 'image' : 'document',
      content: str(media.caption),
      media: {
        providerMediaId: mediaId,
        mimeType: str(media.mime_type),
        filename: str(media.filename),
        kind: type,
      },
    };
  }
  return { ...base, type: 'text', content: readableText(type, m), media: null };
}

/** The kinds SPEC has no type for, as the text a person reading the conversation needs. */
function readableText(type: string, m: Obj): string {
  const found = m[type];
  const part = isObj(found) ? found : {};
  switch (type) {
    case 'location': {
      const where = [str(part.name), str(part.address)].filter((s) => s !== null).join(', ');
      return (
        locationText(where, numeric(part.latitude), numeric(part.longitude)) ?? placeholder(type, m)
      );
    }
    case 'contacts': {
      const cards = list(m.contacts).filter(isObj).map(contactCard);
      return cards.length > 0 ? cards.join('\n') : placeholder(type, m);
    }
    case 'button': {
      // A quick-reply button of a template: the text on the button is what the person said.
      return str(part.text) ?? str(part.payload) ?? placeholder(type, m);
    }
    case 'interactive': {
      const reply = isObj(part.button_reply)
        ? part.button_reply
        : isObj(part.list_reply)
          ? part.list_reply
          : null;
      const title = reply ? str(reply.title) : null;
      if (!reply || !title) return placeholder(type, m);
      const description = str(reply.description);
      return description ? `${title} (${description})` : title;
    }
    case 'reaction': {
      const emoji = str(part.emoji);
      return reactionText(emoji === null, emoji);
    }
    default:
      return placeholder(type, m);
  }
}

function contactCard(c: Obj): string {
  const name = isObj(c.name)
    ? (str(c.name.formatted_name) ??
      ([str(c.name.first_name), str(c.name.last_name)].filter(Boolean).join(' ') || null))
    : null;
  const phones = list(c.phones)
    .filter(isObj)
    .map((p) => str(p.phone))
    .filter((p): p is string => p !== null);
  const emails = list(c.emails)
    .filter(isObj)
    .map((e) => str(e.email))
    .filter((e): e is string => e !== null);
  return `Contact: ${[name ?? 'unnamed', ...phones, ...emails].join(', ')}`;
}

/**
 * A message we cannot show as it is: kept as text that says what it was, with Meta's own
 * explanation when it gave one (`unsupported` messages carry `errors[]`).
 */
function placeholder(type: string, m: Obj): string {
  const error = list(m.errors).find(isObj);
  const why = error ? (str(error.title) ?? str(error.message)) : null;
  const details = error
    ? (str(isObj(error.error_data) ? error.error_data.details : null) ?? str(error.details))
    : null;
  const reason = [why, details].filter(Boolean).join(': ');
  const label = kindLabel(type, 'unknown');
  return reason
    ? `[Unsupported WhatsApp message (${label}): ${reason}]`
    : `[Unsupported WhatsApp message (${label})]`;
}

const STATUSES = new Set(['sent', 'delivered', 'read', 'failed']);

function toStatus(s: unknown): ProviderStatusReport | null {
  if (!isObj(s)) return null;
  const id = str(s.id);
  const status = str(s.status);
  // Other statuses (`deleted`, `warning`…) say nothing about delivery.
  if (!id || !status || !STATUSES.has(status)) return null;
  return {
    providerMessageId: id,
    status: status as ProviderStatusReport['status'],
    reason: status === 'failed' ? failureReason(s.errors) : null,
  };
}

/** `(#131026) Message undeliverable`: Meta's code and title, as Graph errors read elsewhere. */
function failureReason(errors: unknown): string {
  const e = list(errors).find(isObj);
  if (!e) return 'WhatsApp reported the message as failed without a reason';
  const code = numeric(e.code);
  const title = str(e.title) ?? str(e.message) ?? 'failed';
  return code === null ? title : `(#${code}) ${title}`;
}

function toTemplateStatus(value: Obj): TemplateStatusReport | null {
  const id = idOf(value.message_template_id);
  const event = str(value.event);
  if (!id || !event) return null;
  const status = templateStatusOfEvent(event);
  if (status === null) return null;
  return {
    providerTemplateId: id,
    name: str(value.message_template_name),
    language: str(value.message_template_language),
    status,
    reason: templateReasonOf(value.reason),
  };
}
