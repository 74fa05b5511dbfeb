import { sql } from 'kysely';
import type { Tx } from '../db/database.js';

/**
 * Holds the account's contacts against merges and deletes until the transaction ends: one
 * transaction-level advisory lock on the account, which writes nothing. A broadcast batch holds
 * it shared while it queues its messages, so that no recipient is merged away or deleted
 * meanwhile without a row lock on each recipient's contact (a row lock writes the contact's
 * page, and at a million recipients that is most of the contacts table again every checkpoint:
 * docs/performance.md). A merge or a delete holds it exclusively, as the first thing its
 * transaction does, so that it waits for the batches under way and they for it; it takes no
 * row lock a batch could be waiting for while it waits. Accounts whose keys' hashes meet share
 * a lock: a merge may then wait for another account's batch, never for long.
 */
export async function holdContacts(
  trx: Tx,
  accountId: string,
  mode: 'shared' | 'exclusive',
): Promise<void> {
  const key = `contacts ${accountId}`;
  if (mode === 'shared')
    await sql`SELECT pg_advisory_xact_lock_shared(hashtext(${key}))`.execute(trx);
  else await sql`SELECT pg_advisory_xact_lock(hashtext(${key}))`.execute(trx);
}
