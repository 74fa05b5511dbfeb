import { sql, type Selectable } from 'kysely';
import type { ContactsTable, IdentityChannel } from '../db/schema.js';

// A contact row as stored, and what every statement on contacts selects; shared by the
// contacts, identities and merge repositories.

export type ContactRow = Selectable<ContactsTable>;

/** An identity as stored: the channel and the channel's id for the contact. */
export interface StoredIdentity {
  channel: IdentityChannel;
  id: string;
}

/** A contact with its stored identities (WhatsApp's, the phone, is derived when presented). */
export type ContactRecord = ContactRow & { identities: StoredIdentity[] };

/**
 * The contact's stored identities as a JSON array, for a statement whose FROM is `contacts`
 * (unaliased). Unordered: the presentation sorts them (and keeps the statement free of ORDER BY
 * for the prepared-statement tests that look for one).
 */
export const IDENTITIES = sql<
  StoredIdentity[]
>`(SELECT coalesce(json_agg(json_build_object('channel', i.channel, 'id', i.external_id)), '[]'::json) FROM contact_identities i WHERE i.account_id = contacts.account_id AND i.contact_id = contacts.id)`.as(
  'identities',
);

/** Named rather than `*`, so the hot reads run as prepared statements (see createDb). */
export const CONTACT_COLUMNS = [
  'account_id',
  'id',
  'phone',
  'name',
  'email',
  'tags',
  'lifecycle_stage',
  'custom_fields',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof ContactRow)[];
