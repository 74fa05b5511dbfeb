import { sql } from 'kysely';
import { CUSTOM_PLAN, type Db } from '../db/database.js';
import { containsPattern } from '../db/like.js';
import type { ContactFilter } from './contacts.repository.js';

// A search of the contacts (`name ILIKE '%term%' OR phone ILIKE '%term%'`, SPEC.md's "partial
// match on name or phone") answered by contact_search (migration 038): one narrow row per
// contact, name and phone lower-cased, with a GIN index of trigrams keyed by account and column.

/** Matches a search brings back in hand to page through; more are walked (ContactsRepository.list). */
export const SEARCH_IDS_MAX = 5000;

/** Whether the term has a trigram for contact_search's keys (three characters or more). */
export function hasTrigram(term: string): boolean {
  return [...term].length >= 3;
}

/** The term of a search that is the list's only filter and has a trigram; undefined otherwise. */
export function searchedAlone(filter: ContactFilter): string | undefined {
  const { search, ...others } = filter;
  if (search === undefined || !hasTrigram(search)) return undefined;
  return Object.values(others).some((v) => v !== undefined) ? undefined : search;
}

/**
 * The contact_search rows that match a search by `term` (with a trigram): the term's trigram
 * keys narrow to candidates of the account, each checked as ILIKE checks a contact (both sides
 * lower-cased, as PostgreSQL's ILIKE compares them in a multi-byte database). Counting a term
 * that a tenth of a million contacts match reads a third of the pages the contacts would take.
 */
export function searchMatch(accountId: string, term: string) {
  const pattern = containsPattern(term);
  const keys = sql`contact_search_keys(account_id, name, phone)`;
  return sql<boolean>`account_id = ${accountId}
    AND (${keys} @> contact_trigram_keys(${accountId}, 'n', lower(${term}))
      OR ${keys} @> contact_trigram_keys(${accountId}, 'p', lower(${term})))
    AND (name LIKE lower(${pattern}) OR phone LIKE lower(${pattern}))`;
}

/**
 * How many contacts a search by `term` matches: `ids`, the matches themselves, as soon as they
 * are known to be no more than SEARCH_IDS_MAX (then `count` is their number); else null, and
 * `count` counts them. Both statements start at once: a common name's count takes longer than
 * learning it has too many matches to bring.
 */
export function searchFound(
  db: Db,
  accountId: string,
  term: string,
): { ids: Promise<string[] | null>; count: Promise<number> } {
  const match = searchMatch(accountId, term);
  const count = sql<{ n: string }>`
    SELECT count(*) AS n FROM contact_search WHERE ${match} ${CUSTOM_PLAN}`
    .execute(db)
    .then((r) => Number(r.rows[0]!.n));
  // Met by the caller only when the ids are too many.
  count.catch(() => undefined);
  const ids = sql<{ ids: string[] }>`
    SELECT ARRAY(SELECT contact_id FROM contact_search WHERE ${match}
                 LIMIT ${SEARCH_IDS_MAX + 1}) AS ids ${CUSTOM_PLAN}`
    .execute(db)
    .then((r) => {
      const found = r.rows[0]!.ids;
      return found.length <= SEARCH_IDS_MAX ? found : null;
    });
  return { ids, count };
}
