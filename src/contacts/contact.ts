import type { ReadCache } from '../db/read-cache.js';
import { ValidationError } from '../errors.js';
import type { ContactRecord, ContactRow, StoredIdentity } from './contact-columns.js';
import type { Contact } from './contacts.schema.js';
import { presentIdentities } from './identities.js';
import { isValidE164 } from './phone.js';

// The contact as the API shows it, the rules its fields keep, and its cached copy.

const FIELD_KEY = /^[a-z0-9_]{1,64}$/;
/** Tags a contact may carry (DESIGN §2). */
export const MAX_TAGS = 50;

/** The contact as the API shows it; `identities` are the stored ones (the row's, if it has them). */
export function toContact(
  row: ContactRow | ContactRecord,
  identities: readonly StoredIdentity[] = 'identities' in row ? row.identities : [],
): Contact {
  return {
    id: row.id,
    phone: row.phone,
    name: row.name,
    email: row.email,
    tags: row.tags,
    // Written only through the stages' enum.
    lifecycle_stage: row.lifecycle_stage as Contact['lifecycle_stage'],
    custom_fields: row.custom_fields,
    identities: presentIdentities(row.phone, identities),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** A channel's id for a person, as a provider gives it: non-empty text of at most 256 characters. */
export function checkExternalId(externalId: string): string {
  if (externalId.length < 1 || externalId.length > 256 || externalId.includes('\u0000')) {
    throw new ValidationError('identity', 'must be 1 to 256 characters');
  }
  return externalId;
}

export function checkPhone(phone: string): string {
  if (!isValidE164(phone)) {
    throw new ValidationError('phone', 'must be a valid E.164 number such as +14155550123');
  }
  return phone;
}

/** Trimmed, 1–64 characters, de-duplicated in first-seen order; `field` names them in errors. */
export function normaliseTags(tags: string[], field = 'tags'): string[] {
  const out: string[] = [];
  for (const [i, raw] of tags.entries()) {
    const tag = raw.trim();
    if (tag.length < 1 || tag.length > 64) {
      throw new ValidationError(`${field}.${i}`, 'must be 1 to 64 characters after trimming');
    }
    if (!out.includes(tag)) out.push(tag);
  }
  return out;
}

export function checkFieldKeys(fields: Record<string, unknown>): void {
  for (const key of Object.keys(fields)) {
    if (!FIELD_KEY.test(key)) {
      throw new ValidationError(
        `custom_fields.${key}`,
        'key must be 1 to 64 characters of a-z, 0-9 and _',
      );
    }
  }
}

/**
 * Runs a change to these contacts; once it has committed (or failed), this process's cached
 * copies (keyed `<account id> <contact id>`) go.
 */
export async function changing<T>(
  cache: ReadCache<Contact>,
  accountId: string,
  ids: string | string[],
  work: () => Promise<T>,
): Promise<T> {
  try {
    return await work();
  } finally {
    for (const id of typeof ids === 'string' ? [ids] : ids) cache.invalidate(`${accountId} ${id}`);
  }
}
