import { newId } from '../../ids.js';
import type { ContactRow } from '../contact-columns.js';
import type { ImportRow } from './import-columns.js';
import type { ContactValues } from './imports.repository.js';

// How an import's rows become contacts: a new contact from a phone's first row, and each later
// row of the phone (or each row of an existing contact) applied to what came before.

/** The rows by phone, each phone's in the file's order. */
export function groupByPhone(rows: ImportRow[]): Map<string, ImportRow[]> {
  const out = new Map<string, ImportRow[]>();
  for (const row of rows) {
    const list = out.get(row.phone);
    if (list) list.push(row);
    else out.set(row.phone, [row]);
  }
  return out;
}

export function valuesOf(c: ContactRow): ContactValues {
  return {
    id: c.id,
    name: c.name,
    email: c.email,
    tags: c.tags,
    lifecycle_stage: c.lifecycle_stage,
    custom_fields: c.custom_fields,
  };
}

export function newContact(accountId: string, row: ImportRow, now: Date): ContactRow {
  return {
    account_id: accountId,
    id: newId('con'),
    phone: row.phone,
    name: row.name ?? null,
    email: row.email ?? null,
    tags: row.tags ?? [],
    lifecycle_stage: row.lifecycle_stage ?? null,
    custom_fields: row.custom_fields,
    created_at: now,
    updated_at: now,
  };
}

/** The contact's fields after the row: empty cells leave theirs, tags are replaced, fields merged. */
export function applyRow(contact: ContactRow, row: ImportRow): ContactValues {
  return {
    id: contact.id,
    name: row.name ?? contact.name,
    email: row.email ?? contact.email,
    tags: row.tags ?? contact.tags,
    lifecycle_stage: row.lifecycle_stage ?? contact.lifecycle_stage,
    custom_fields: { ...contact.custom_fields, ...row.custom_fields },
  };
}

export function differs(contact: ContactRow, values: ContactValues): boolean {
  return (
    values.name !== contact.name ||
    values.email !== contact.email ||
    values.lifecycle_stage !== contact.lifecycle_stage ||
    JSON.stringify(values.tags) !== JSON.stringify(contact.tags) ||
    Object.entries(values.custom_fields).some(([k, v]) => contact.custom_fields[k] !== v)
  );
}
