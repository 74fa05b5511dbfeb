import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { deleteInBatches, type PruneTask } from '../db/retention.js';

/** Stored provider webhooks are kept this long after they were processed (their bytes, for audits). */
export const INBOUND_WEBHOOK_RETENTION_MS = 7 * 86_400_000;
/**
 * Another name of a Messenger or Instagram message (a caption's id) is kept this long: a
 * delivery or read naming the caption later than that is dropped as naming an unknown id, the
 * message keeping the status it had.
 */
export const PROVIDER_ID_ALIAS_RETENTION_MS = 30 * 86_400_000;

/**
 * Provider webhooks processed before `before`: a dead one replayed by `switchboard jobs retry`
 * long after it came is kept its full time from then. One not processed (its job still waiting,
 * or kept dead) keeps its bytes whatever its age, for `switchboard jobs retry`. Batches are
 * smaller than elsewhere: each row carries the webhook's bytes.
 */
export function pruneInboundWebhooks(db: Db, before: Date, batchSize = 1_000): Promise<number> {
  return deleteInBatches(
    db,
    'inbound_webhooks',
    (limit) => sql`
      SELECT ctid FROM inbound_webhooks
      WHERE processed_at < ${before} AND processed_at IS NOT NULL
      LIMIT ${limit}`,
    batchSize,
  );
}

/** Aliases of provider message ids (captions on Messenger and Instagram) made before `before`. */
export function pruneProviderIdAliases(db: Db, before: Date, batchSize = 5_000): Promise<number> {
  return deleteInBatches(
    db,
    'provider_id_aliases',
    (limit) => sql`
      SELECT ctid FROM provider_id_aliases WHERE created_at < ${before} LIMIT ${limit}`,
    batchSize,
  );
}

/** What inbound intake keeps for a while and then forgets. */
export const inboundPruneTasks: readonly PruneTask[] = [
  {
    name: 'webhooks',
    maxAgeMs: INBOUND_WEBHOOK_RETENTION_MS,
    prune: (db, before) => pruneInboundWebhooks(db, before),
  },
  {
    name: 'aliases',
    maxAgeMs: PROVIDER_ID_ALIAS_RETENTION_MS,
    prune: (db, before) => pruneProviderIdAliases(db, before),
  },
];
