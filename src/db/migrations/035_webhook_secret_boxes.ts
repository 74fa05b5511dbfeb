import { sql, type Kysely, type Migration } from 'kysely';

/** Seals a webhook's signing secret under SECRETS_KEY; null when the service has no key. */
export type SealWebhookSecret = ((secret: string) => Buffer) | null;

/** Webhooks sealed per statement: an account has at most 20, a store a few thousand. */
const BATCH = 1_000;

/**
 * Webhook signing secrets were kept in clear (`secret`); they are now sealed under SECRETS_KEY
 * (`secret_box`, as the webhooks feature seals them), so a copy of the database, a backup or a
 * query that prints rows holds none. The clear column is dropped before the boxes are written:
 * the rows written afterwards no longer carry it (the versions they replace go with VACUUM).
 * Without a key, a store holding webhooks is refused, and nothing is changed or lost.
 */
export function sealWebhookSecrets(seal: SealWebhookSecret): Migration {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      const { rows } = await sql<{ account_id: string; id: string; secret: string }>`
        SELECT account_id, id, secret FROM webhooks ORDER BY account_id, id`.execute(db);
      if (rows.length > 0 && !seal) {
        throw new Error(
          `${rows.length} webhook signing secret(s) are stored in clear and are now stored encrypted: SECRETS_KEY is needed to encrypt them`,
        );
      }
      await sql`ALTER TABLE webhooks ADD COLUMN secret_box bytea, DROP COLUMN secret`.execute(db);
      for (let i = 0; i < rows.length; i += BATCH) {
        const batch = rows.slice(i, i + BATCH);
        await sql`
          UPDATE webhooks w SET secret_box = s.box
          FROM unnest(${batch.map((r) => r.account_id)}::text[], ${batch.map((r) => r.id)}::text[],
                      ${batch.map((r) => seal!(r.secret))}::bytea[]) AS s(account_id, id, box)
          WHERE w.account_id = s.account_id AND w.id = s.id`.execute(db);
      }
      await sql`ALTER TABLE webhooks ALTER COLUMN secret_box SET NOT NULL`.execute(db);
    },
    down(): Promise<void> {
      throw new Error('migrations are forward-only');
    },
  };
}
