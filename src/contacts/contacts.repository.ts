import { sql, type Selectable } from 'kysely';
import { CUSTOM_PLAN, type Db, type Tx } from '../db/database.js';
import { paged } from '../db/paged.js';
import type { Channel, ContactsTable, CustomFieldValue, IdentityChannel } from '../db/schema.js';
import type { PageRequest } from '../http/pagination.js';

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
const IDENTITIES = sql<
  StoredIdentity[]
>`(SELECT coalesce(json_agg(json_build_object('channel', i.channel, 'id', i.external_id)), '[]'::json) FROM contact_identities i WHERE i.account_id = contacts.account_id AND i.contact_id = contacts.id)`.as(
  'identities',
);

/** A contact's address on one channel, as read under a lock for sending. */
export interface MessagingAddress {
  phone: string | null;
  /** The stored identity on the channel (never set for whatsapp). */
  identity: string | null;
}

/** Named rather than `*`, so the hot reads run as prepared statements (see createDb). */
const CONTACT_COLUMNS = [
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

export interface ContactFilter {
  tag?: string;
  search?: string;
}

export interface ContactChanges {
  phone?: string | null;
  name?: string | null;
  email?: string | null;
  tags?: string[];
  setFields?: Record<string, CustomFieldValue>;
  removeFields?: string[];
  lifecycle_stage?: string | null;
  updated_at: Date;
}

/** A LIKE pattern that matches `term` anywhere, with the term's own % _ \ taken literally. */
export function containsPattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export class ContactsRepository {
  constructor(private readonly db: Db) {}

  async insert(trx: Tx, row: ContactRow): Promise<void> {
    await trx
      .insertInto('contacts')
      .values({ ...row, custom_fields: JSON.stringify(row.custom_fields) })
      .execute();
  }

  /**
   * Any number of contacts by (account, id) in one round trip, aligned with `keys`: each key is
   * matched within its own account, so a batch that mixes accounts cannot cross them.
   */
  async findMany(
    keys: readonly { accountId: string; id: string }[],
  ): Promise<(ContactRecord | undefined)[]> {
    const rows = await this.db
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .select(IDENTITIES)
      .where(
        sql<boolean>`(account_id, id) IN (SELECT * FROM unnest(${keys.map((k) => k.accountId)}::text[], ${keys.map((k) => k.id)}::text[]))`,
      )
      .execute();
    const byKey = new Map(rows.map((row) => [`${row.account_id} ${row.id}`, row]));
    return keys.map((k) => byKey.get(`${k.accountId} ${k.id}`));
  }

  async find(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<ContactRecord | undefined> {
    return trx
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .select(IDENTITIES)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async update(
    trx: Tx,
    accountId: string,
    id: string,
    changes: ContactChanges,
  ): Promise<ContactRecord | undefined> {
    const { setFields, removeFields, ...columns } = changes;
    const set: Record<string, unknown> = { ...columns };
    if (setFields !== undefined || removeFields !== undefined) {
      set.custom_fields = sql<
        ContactsTable['custom_fields']
      >`(custom_fields || ${JSON.stringify(setFields ?? {})}::jsonb) - ${removeFields ?? []}::text[]`;
    }
    return trx
      .updateTable('contacts')
      .set(set)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning(CONTACT_COLUMNS)
      .returning(IDENTITIES)
      .executeTakeFirst();
  }

  async delete(trx: Tx, accountId: string, id: string): Promise<boolean> {
    const result = await trx
      .deleteFrom('contacts')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  async list(
    accountId: string,
    filter: ContactFilter,
    page: PageRequest,
  ): Promise<{ rows: ContactRecord[]; total: number }> {
    let query = this.db.selectFrom('contacts').where('account_id', '=', accountId);
    if (filter.tag !== undefined) {
      query = query.where(sql<boolean>`tags @> ARRAY[${filter.tag}]::text[]`);
    }
    if (filter.search !== undefined) {
      const pattern = containsPattern(filter.search);
      // Both columns carry trigram indexes, so a partial match stays an index scan at scale.
      // A null phone matches nothing, and the name alone decides.
      query = query.where((eb) =>
        eb.or([eb('name', 'ilike', pattern), eb('phone', 'ilike', pattern)]),
      );
    }
    const filtered = filter.tag !== undefined || filter.search !== undefined;
    return paged(query, page, (q) =>
      q
        .select(CONTACT_COLUMNS)
        .select(IDENTITIES)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .$if(filtered, (q) => q.modifyEnd(CUSTOM_PLAN)),
    );
  }

  /** Inserts unless the phone is taken; `undefined` means another row has it (race-safe). */
  async insertIfPhoneFree(trx: Tx, row: ContactRow): Promise<boolean> {
    const inserted = await trx
      .insertInto('contacts')
      .values({ ...row, custom_fields: JSON.stringify(row.custom_fields) })
      .onConflict((oc) => oc.columns(['account_id', 'phone']).doNothing())
      .returning('id')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  /**
   * Inserts these rows (of one account) except where the phone is taken (race-safe, as
   * insertIfPhoneFree); returns the ids inserted. Rows go in phone order, the order every
   * multi-row insert of contacts takes, so that two of them never wait on each other's phones.
   */
  async insertManyIfPhoneFree(trx: Tx, rows: ContactRow[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const sorted = [...rows].sort((a, b) =>
      a.phone! < b.phone! ? -1 : a.phone! > b.phone! ? 1 : 0,
    );
    const inserted = await trx
      .insertInto('contacts')
      .values(sorted.map((row) => ({ ...row, custom_fields: JSON.stringify(row.custom_fields) })))
      .onConflict((oc) => oc.columns(['account_id', 'phone']).doNothing())
      .returning('id')
      .execute();
    return new Set(inserted.map((r) => r.id));
  }

  /**
   * The contacts with these phones, held as lockByPhone holds them, locked in id order. Each
   * phone and then each id is looked up by its unique index on its own: a plan that cannot
   * drift, whatever the table's statistics say (`phone = ANY(...)` is otherwise planned on the
   * trigram index, ~1 ms a phone, or on a scan of the whole account while statistics are stale).
   * A contact whose phone changed meanwhile comes back with its new phone.
   */
  async lockManyByPhone(trx: Tx, accountId: string, phones: string[]): Promise<ContactRecord[]> {
    if (phones.length === 0) return [];
    const rows = await sql<ContactRecord>`
      WITH wanted AS MATERIALIZED (
        SELECT DISTINCT c.id FROM unnest(${phones}::text[]) AS p(phone)
        CROSS JOIN LATERAL (
          SELECT id FROM contacts WHERE account_id = ${accountId} AND phone = p.phone OFFSET 0
        ) c
      )
      SELECT ${sql.join(CONTACT_COLUMNS.map((c) => sql.ref(`l.${c}`)))}, l.identities
      FROM (SELECT id FROM wanted ORDER BY id) w
      CROSS JOIN LATERAL (
        SELECT ${sql.join(CONTACT_COLUMNS.map((c) => sql.ref(c)))}, ${IDENTITIES}
        FROM contacts WHERE account_id = ${accountId} AND id = w.id
        FOR KEY SHARE
      ) l`.execute(trx);
    return rows.rows;
  }

  async findByPhone(trx: Tx, accountId: string, phone: string): Promise<ContactRow | undefined> {
    return trx
      .selectFrom('contacts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('phone', '=', phone)
      .executeTakeFirst();
  }

  /**
   * The contact with this phone, held (FOR KEY SHARE) until the transaction ends so that a merge
   * or a deletion waits for it; undefined when there is none, or when the one this statement saw
   * was merged away or deleted while it waited (the caller looks again).
   */
  async lockByPhone(trx: Tx, accountId: string, phone: string): Promise<ContactRecord | undefined> {
    return trx
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .select(IDENTITIES)
      .where('account_id', '=', accountId)
      .where('phone', '=', phone)
      .forKeyShare()
      .executeTakeFirst();
  }

  /** The contact by id, held as lockByPhone holds it. */
  async lockById(trx: Tx, accountId: string, id: string): Promise<ContactRecord | undefined> {
    return trx
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .select(IDENTITIES)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .forKeyShare()
      .executeTakeFirst();
  }

  /** The contact with this identity on the channel, if any (no lock). */
  async findByIdentity(
    accountId: string,
    channel: IdentityChannel,
    externalId: string,
  ): Promise<ContactRecord | undefined> {
    return this.db
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
      )
      .executeTakeFirst();
  }

  /** The contact with this identity on the channel, held as lockByPhone holds it. */
  async lockByIdentity(
    trx: Tx,
    accountId: string,
    channel: IdentityChannel,
    externalId: string,
  ): Promise<ContactRecord | undefined> {
    return trx
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
      )
      .forKeyShare()
      .executeTakeFirst();
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
   * Moves the messages, notes and broadcast replies of conversation `from` into `into` (the same
   * person's, on the same channel) and deletes `from`; `into` keeps the later inbound time, and
   * is open if either was (a question asked in `from` must not vanish from the open inbox). Its
   * assignee stays. Both conversations are locked by the caller.
   */
  async foldConversation(
    trx: Tx,
    accountId: string,
    from: string,
    into: string,
    now: Date,
  ): Promise<void> {
    for (const table of ['messages', 'notes', 'broadcast_recipients'] as const) {
      await trx
        .updateTable(table)
        .set({ conversation_id: into })
        .where('account_id', '=', accountId)
        .where('conversation_id', '=', from)
        .execute();
    }
    const gone = await trx
      .deleteFrom('conversations')
      .where('account_id', '=', accountId)
      .where('id', '=', from)
      .returning(['last_inbound_at', 'status'])
      .executeTakeFirst();
    await trx
      .updateTable('conversations')
      .set((eb) => ({
        // GREATEST ignores a NULL.
        last_inbound_at: sql<Date | null>`greatest(${eb.ref('last_inbound_at')}, ${gone?.last_inbound_at ?? null}::timestamptz)`,
        ...(gone?.status === 'open' ? { status: 'open' as const } : {}),
        updated_at: now,
      }))
      .where('account_id', '=', accountId)
      .where('id', '=', into)
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

  /**
   * The phone and the stored identity on `channel` of each of these contacts, held (FOR KEY
   * SHARE, in id order) until the transaction ends: a contact merged away or deleted meanwhile
   * is absent, and none can be merged away under a message being recorded for it.
   */
  async lockForMessaging(
    trx: Tx,
    accountId: string,
    ids: readonly string[],
    channel: Channel,
  ): Promise<Map<string, MessagingAddress>> {
    if (ids.length === 0) return new Map();
    const rows = await trx
      .selectFrom('contacts as ct')
      .leftJoin('contact_identities as ci', (j) =>
        j
          .onRef('ci.account_id', '=', 'ct.account_id')
          .onRef('ci.contact_id', '=', 'ct.id')
          .on('ci.channel', '=', channel as IdentityChannel),
      )
      .select(['ct.id', 'ct.phone', 'ci.external_id'])
      .where('ct.account_id', '=', accountId)
      .where('ct.id', 'in', [...ids])
      .orderBy('ct.id')
      .forKeyShare('ct')
      .execute();
    return new Map(rows.map((r) => [r.id, { phone: r.phone, identity: r.external_id ?? null }]));
  }

  /** These contacts locked for a merge (FOR UPDATE, in id order), with their identities. */
  async lockForMerge(
    trx: Tx,
    accountId: string,
    ids: readonly string[],
  ): Promise<Map<string, ContactRecord>> {
    const rows = await trx
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .select(IDENTITIES)
      .where('account_id', '=', accountId)
      .where('id', 'in', [...ids])
      .orderBy('id')
      .forUpdate()
      .execute();
    return new Map(rows.map((r) => [r.id, r]));
  }

  /** The channels on which these contacts have a conversation, per contact; the rows locked. */
  async lockConversationChannels(
    trx: Tx,
    accountId: string,
    contactIds: readonly string[],
  ): Promise<{ id: string; contact_id: string; channel: Channel }[]> {
    return trx
      .selectFrom('conversations')
      .select(['id', 'contact_id', 'channel'])
      .where('account_id', '=', accountId)
      .where('contact_id', 'in', [...contactIds])
      .orderBy('id')
      .forUpdate()
      .execute();
  }

  /**
   * Moves one contact's identities and conversations (with their messages and notes) to
   * another; for a merge, after both are locked and checked not to share a channel.
   */
  async moveBelongings(trx: Tx, accountId: string, from: string, to: string): Promise<void> {
    await trx
      .updateTable('contact_identities')
      .set({ contact_id: to })
      .where('account_id', '=', accountId)
      .where('contact_id', '=', from)
      .execute();
    await trx
      .updateTable('conversations')
      .set({ contact_id: to })
      .where('account_id', '=', accountId)
      .where('contact_id', '=', from)
      .execute();
  }

  /** Sets the name of a contact that has none; false when it has one or is gone. */
  async nameIfUnnamed(
    trx: Tx,
    accountId: string,
    id: string,
    name: string,
    now: Date,
  ): Promise<boolean> {
    const result = await trx
      .updateTable('contacts')
      .set({ name, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('name', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Replaces a merged contact's fields (its identities are moved separately). */
  async replaceFields(
    trx: Tx,
    accountId: string,
    id: string,
    fields: Pick<ContactRow, 'phone' | 'name' | 'email' | 'tags' | 'custom_fields' | 'updated_at'>,
  ): Promise<ContactRecord> {
    return trx
      .updateTable('contacts')
      .set({ ...fields, custom_fields: JSON.stringify(fields.custom_fields) })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning(CONTACT_COLUMNS)
      .returning(IDENTITIES)
      .executeTakeFirstOrThrow();
  }

  async addTags(trx: Tx, accountId: string, tags: string[], now: Date): Promise<void> {
    if (tags.length === 0) return;
    await trx
      .insertInto('tags')
      .values(tags.map((name) => ({ account_id: accountId, name, created_at: now })))
      .onConflict((oc) => oc.doNothing())
      .execute();
  }

  async listTags(
    accountId: string,
    page: PageRequest,
  ): Promise<{ rows: { name: string; created_at: Date }[]; total: number }> {
    return paged(this.db.selectFrom('tags').where('account_id', '=', accountId), page, (q) =>
      q.select(['name', 'created_at']).orderBy('name'),
    );
  }
}
