import { AppError, ValidationError, type ErrorDetail } from '../../errors.js';
import { badText } from '../../http/input-guard.js';
import { MAX_TAGS } from '../contact.js';
import { isValidE164 } from '../phone.js';
import { LIFECYCLE_STAGES } from '../contacts.schema.js';

// The columns of a contacts CSV (DESIGN §6): what an import reads and an export writes.

/** The columns besides `custom_fields.<key>`, in the order an export writes them. */
export const FIXED_COLUMNS = ['phone', 'name', 'email', 'tags', 'lifecycle_stage'] as const;
type FixedColumn = (typeof FIXED_COLUMNS)[number];
export const CUSTOM_FIELD_PREFIX = 'custom_fields.';
const FIELD_KEY = /^[a-z0-9_]{1,64}$/;
/** ajv-formats' `email`, the rule `POST /v1/contacts` applies. */
const EMAIL =
  /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/i;
/** A cell an export escaped against formula injection: `'` before one of = + - @ (see csv.ts). */
const ESCAPED = /^'[=+\-@\t\r]/;

export type Column = { kind: 'fixed'; name: FixedColumn } | { kind: 'field'; key: string };

/** One data row, read: only the cells that were not empty (an empty cell leaves its field). */
export interface ImportRow {
  line: number;
  phone: string;
  name?: string;
  email?: string;
  tags?: string[];
  lifecycle_stage?: string;
  custom_fields: Record<string, string>;
}

/**
 * The header row's columns; a 422 naming every unknown or repeated column, or a missing phone
 * (a row is matched to its contact by phone).
 */
export function readHeader(cells: string[]): Column[] {
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  const columns: Column[] = [];
  for (const raw of cells) {
    const name = raw.trim();
    const field = `header.${name.slice(0, 100)}`;
    if (seen.has(name)) details.push({ field, issue: 'is repeated: each column appears once' });
    seen.add(name);
    if ((FIXED_COLUMNS as readonly string[]).includes(name)) {
      columns.push({ kind: 'fixed', name: name as FixedColumn });
    } else if (name.startsWith(CUSTOM_FIELD_PREFIX)) {
      const key = name.slice(CUSTOM_FIELD_PREFIX.length);
      if (!FIELD_KEY.test(key))
        details.push({
          field,
          issue: 'custom field keys are 1 to 64 characters of a-z, 0-9 and _',
        });
      columns.push({ kind: 'field', key });
    } else {
      details.push({
        field,
        issue: `unknown column "${name.slice(0, 100)}": the columns are ${FIXED_COLUMNS.join(', ')} and custom_fields.<key>`,
      });
    }
  }
  if (cells.length === 0 || (cells.length === 1 && cells[0]!.trim() === ''))
    throw new ValidationError('body', 'must start with a header row naming its columns');
  if (!seen.has('phone'))
    details.push({ field: 'header', issue: 'must have a phone column: rows are matched by phone' });
  if (details.length > 0) {
    const message = details.map((d) => `${d.field}: ${d.issue}`).join('; ');
    throw new AppError('validation_error', message, 422, details);
  }
  return columns;
}

/** A cell as written, with an export's formula escape taken off. */
function unescape(cell: string): string {
  return ESCAPED.test(cell) ? cell.slice(1) : cell;
}

/**
 * One data row read against the header: the row, or every bad cell in it (then the whole row
 * fails). Cells are trimmed; an empty one leaves its field as it is.
 */
export function readRow(
  columns: Column[],
  cells: string[],
  line: number,
): { row: ImportRow } | { errors: { line: number; field: string; issue: string }[] } {
  const errors: { line: number; field: string; issue: string }[] = [];
  const fail = (field: string, issue: string) => errors.push({ line, field, issue });
  if (cells.length !== columns.length) {
    fail('row', `has ${cells.length} cells; the header has ${columns.length} columns`);
    return { errors };
  }
  const row: ImportRow = { line, phone: '', custom_fields: {} };
  for (const [i, column] of columns.entries()) {
    const value = unescape(cells[i]!.trim());
    const field = column.kind === 'fixed' ? column.name : `${CUSTOM_FIELD_PREFIX}${column.key}`;
    const bad = badText(value);
    if (bad) {
      fail(field, bad);
      continue;
    }
    if (value === '') {
      if (field === 'phone') fail('phone', 'is required: rows are matched by phone');
      continue;
    }
    if (column.kind === 'field') {
      if (value.length > 2000) fail(field, 'must be at most 2000 characters');
      else row.custom_fields[column.key] = value;
      continue;
    }
    switch (column.name) {
      case 'phone':
        if (isValidE164(value)) row.phone = value;
        else fail(field, 'must be a valid E.164 number such as +14155550123');
        break;
      case 'name':
        if (value.length > 255) fail(field, 'must be at most 255 characters');
        else row.name = value;
        break;
      case 'email':
        if (value.length > 254 || !EMAIL.test(value)) fail(field, 'must be a valid email');
        else row.email = value;
        break;
      case 'lifecycle_stage':
        if ((LIFECYCLE_STAGES as readonly string[]).includes(value)) row.lifecycle_stage = value;
        else fail(field, `must be one of ${LIFECYCLE_STAGES.join(', ')}`);
        break;
      case 'tags': {
        const tags = readTags(value);
        if (typeof tags === 'string') fail(field, tags);
        else row.tags = tags;
        break;
      }
    }
  }
  return errors.length > 0 ? { errors } : { row };
}

/** `;`-separated, each trimmed (empty pieces dropped), 1–64 characters, de-duplicated, ≤ 50. */
function readTags(cell: string): string[] | string {
  const tags: string[] = [];
  for (const piece of cell.split(';')) {
    const tag = piece.trim();
    if (tag === '') continue;
    if (tag.length > 64) return `each tag must be 1 to 64 characters ("${tag.slice(0, 20)}…")`;
    if (!tags.includes(tag)) tags.push(tag);
  }
  if (tags.length > MAX_TAGS) return `a contact has at most ${MAX_TAGS} tags`;
  return tags;
}
