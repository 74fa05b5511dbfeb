import type { Contact } from '../../api/types.js';

/** A contact has at most this many tags (DESIGN §2); a merge past it is refused. */
const MAX_TAGS = 50;

export type MergePreview =
  | { ok: true; result: Omit<Contact, 'id' | 'created_at' | 'updated_at'> }
  | { ok: false; reason: string };

/**
 * What `POST /v1/contacts/{into}/merge {contact_id: other}` makes, by the rules of DESIGN §4 and
 * src/contacts/merge.ts: identities move over (two on one channel, two phones included, is a
 * 409), tags join (into's first; more than 50 is a 422), custom fields fill the keys `into`
 * lacks (its values win), a missing phone, name or email is taken from `other`, and the
 * lifecycle stage stays `into`'s.
 */
export function previewMerge(into: Contact, other: Contact): MergePreview {
  if (into.id === other.id) return { ok: false, reason: 'A contact cannot be merged into itself.' };
  if (into.phone !== null && other.phone !== null)
    return {
      ok: false,
      reason: 'Both contacts have a phone (a WhatsApp identity): they cannot be merged.',
    };
  for (const identity of into.identities) {
    if (other.identities.some((o) => o.channel === identity.channel))
      return {
        ok: false,
        reason: `Both contacts have a ${identity.channel} identity: they cannot be merged.`,
      };
  }
  const tags = [...into.tags, ...other.tags.filter((t) => !into.tags.includes(t))];
  if (tags.length > MAX_TAGS)
    return {
      ok: false,
      reason: `Together they have ${tags.length} tags; a contact has at most ${MAX_TAGS}.`,
    };
  const phone = into.phone ?? other.phone;
  const identities = [...into.identities, ...other.identities]
    .filter((i, n, all) => all.findIndex((j) => j.channel === i.channel) === n)
    .sort((a, b) => a.channel.localeCompare(b.channel));
  return {
    ok: true,
    result: {
      phone,
      name: into.name ?? other.name,
      email: into.email ?? other.email,
      tags,
      lifecycle_stage: into.lifecycle_stage,
      custom_fields: { ...other.custom_fields, ...into.custom_fields },
      identities,
    },
  };
}
