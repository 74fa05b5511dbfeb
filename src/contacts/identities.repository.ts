import { sql } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { IdentityChannel } from '../db/schema.js';
import {
  CONTACT_COLUMNS,
  IDENTITIES,
  type ContactRecord,
  type ContactRow,
} from './contact-columns.js';

/** The ids a contact is known by on messenger, instagram and webchat (WhatsApp's is the phone). */
export class ContactIdentitiesRepository {
  constructor(private readonly db: Db) {}

  /** The contact with this identity on the channel, if any (no lock). */
  findByIdentity(
    accountId: string,
    channel: IdentityChannel,
    externalId: string,
  ): Promise<ContactRecord | undefined> {
    return byIdentity(this.db, accountId, channel, externalId).executeTakeFirst();
  }

  /** The contact with this identity on the channel, held as lockByPhone holds it. */
  lockByIdentity(
    trx: Tx,
    accountId: string,
    channel: IdentityChannel,
    externalId: string,
  ): Promise<ContactRecord | undefined> {
    return byIdentity(trx, accountId, channel, externalId).forKeyShare().executeTakeFirst();
  }

  async deleteIdentity(
    trx: Tx,
    accountId: string,
    channel: IdentityChannel,
    externalId: string,
  ): Promise<void> {
    await trx
      .deleteFrom('contact_identities')
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .where('external_id', '=', externalId)
      .execute();
  }

  /**
   * Gives the contact that holds identity `from` on `channel` the identity `to` instead; answers
   * that contact's id, or undefined when no contact holds `from`. `to` must be free: a contact
   * holding it makes this fail with a unique violation.
   */
  async renameIdentity(
    trx: Tx,
    accountId: string,
    channel: IdentityChannel,
    from: string,
    to: string,
  ): Promise<string | undefined> {
    const row = await trx
      .updateTable('contact_identities')
      .set({ external_id: to })
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .where('external_id', '=', from)
      .returning('contact_id')
      .executeTakeFirst();
    return row?.contact_id;
  }

  /**
   * Inserts the contact with its identity, in one statement that inserts neither when the
   * identity is already taken (race-safe: a concurrent insert of the same identity waits for
   * the first and then does nothing). True when inserted.
   */
  async insertWithIdentity(
    trx: Tx,
    row: ContactRow,
    channel: IdentityChannel,
    externalId: string,
  ): Promise<boolean> {
    const result = await sql<{ id: string }>`
      WITH identity AS (
        INSERT INTO contact_identities (account_id, contact_id, channel, external_id, created_at)
        VALUES (${row.account_id}, ${row.id}, ${channel}, ${externalId}, ${row.created_at})
        ON CONFLICT DO NOTHING
        RETURNING contact_id
      )
      INSERT INTO contacts (account_id, id, phone, name, email, tags, lifecycle_stage,
        custom_fields, created_at, updated_at)
      SELECT ${row.account_id}, identity.contact_id, ${row.phone}, ${row.name}, ${row.email},
        ${row.tags}::text[], ${row.lifecycle_stage}, ${JSON.stringify(row.custom_fields)}::jsonb,
        ${row.created_at}, ${row.updated_at}
      FROM identity
      RETURNING id`.execute(trx);
    return result.rows.length > 0;
  }
}

/** The contact holding this identity on the channel, with its columns and identities. */
function byIdentity(db: Db | Tx, accountId: string, channel: IdentityChannel, externalId: string) {
  return db
    .selectFrom('contacts')
    .select(CONTACT_COLUMNS)
    .select(IDENTITIES)
    .where('account_id', '=', accountId)
    .where('id', '=', (eb) =>
      eb
        .selectFrom('contact_identities')
        .select('contact_id')
        .where('account_id', '=', accountId)
        .where('channel', '=', channel)
        .where('external_id', '=', externalId),
    );
}
