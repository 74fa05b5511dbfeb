import { sql } from 'kysely';
import { CUSTOM_PLAN, type Db, type Tx } from '../db/database.js';
import { containsPattern } from '../db/like.js';
import { paged } from '../db/paged.js';
import type { Channel, ContactsTable, CustomFieldValue, IdentityChannel } from '../db/schema.js';
import type { PageRequest } from '../http/pagination.js';
import {
  CONTACT_COLUMNS,
  IDENTITIES,
  type ContactRecord,
  type ContactRow,
} from './contact-columns.js';
import { hasTrigram, searchedAlone, searchFound, searchMatch } from './contact-search.js';

/** A contact's address on one channel, as read under a lock for sending. */
export interface MessagingAddress {
  phone: string | null;
  /** The stored identity on the channel (never set for whatsapp). */
  identity: string | null;
}

export interface ContactFilter {
  tag?: string;
  search?: string;
  lifecycle_stage?: string;
  /** Contacts with a conversation on this channel. */
  channel?: Channel;
}

/** Where an export page starts: after this contact, newest first. */
export interface ContactCursor {
  /** As PostgreSQL writes the contact's `created_at` (to the microsecond). */
  created_at: string;
  id: string;
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

/** A contact as an export writes it, with its keyset cursor's time. */
export type ExportRow = Pick<
  ContactRow,
  'id' | 'phone' | 'name' | 'email' | 'tags' | 'lifecycle_stage' | 'custom_fields'
> & { cursor_at: string };

export class ContactsRepository {
  constructor(private readonly db: Db) {}

  /** These rows in one statement, in the order given. */
  async insertMany(trx: Tx, rows: ContactRow[]): Promise<void> {
    if (rows.length === 0) return;
    await trx
      .insertInto('contacts')
      .values(rows.map((row) => ({ ...row, custom_fields: JSON.stringify(row.custom_fields) })))
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

  /**
   * Applies the changes if any of them changes the contact (`updated_at` aside), answering it
   * as changed; undefined when it is gone or would stay as it is (then it is not written, and
   * keeps its `updated_at`).
   */
  async updateIfChanged(
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
    const changed = Object.entries(set)
      .filter(([column]) => column !== 'updated_at')
      .map(([column, value]) => sql`${sql.ref(column)} IS DISTINCT FROM ${value}`);
    return trx
      .updateTable('contacts')
      .set(set)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where(
        changed.length > 0 ? sql<boolean>`(${sql.join(changed, sql` OR `)})` : sql<boolean>`false`,
      )
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

  /**
   * The account's contacts that pass the filter, nothing selected yet. A search by three
   * characters or more is answered by contact_search (migration 038) unless `scan` is asked:
   * then each contact is checked with ILIKE, which suits a walk of the newest contacts for a
   * term that many of them match.
   */
  private filtered(accountId: string, filter: ContactFilter, search: 'keys' | 'scan' = 'keys') {
    let query = this.db.selectFrom('contacts').where('account_id', '=', accountId);
    if (filter.tag !== undefined) {
      query = query.where(sql<boolean>`tags @> ARRAY[${filter.tag}]::text[]`);
    }
    if (filter.search !== undefined) {
      const term = filter.search;
      if (search === 'keys' && hasTrigram(term)) {
        query = query.where(
          sql<boolean>`id IN (SELECT contact_id FROM contact_search WHERE ${searchMatch(accountId, term)} OFFSET 0)`,
        );
      } else {
        // A null phone matches nothing, and the name alone decides.
        const pattern = containsPattern(term);
        query = query.where((eb) =>
          eb.or([eb('name', 'ilike', pattern), eb('phone', 'ilike', pattern)]),
        );
      }
    }
    if (filter.lifecycle_stage !== undefined) {
      query = query.where('lifecycle_stage', '=', filter.lifecycle_stage);
    }
    if (filter.channel !== undefined) {
      // The conversations' unique (account, contact, channel) index answers each contact.
      query = query.where(
        sql<boolean>`EXISTS (SELECT 1 FROM conversations cv WHERE cv.account_id = contacts.account_id AND cv.contact_id = contacts.id AND cv.channel = ${filter.channel})`,
      );
    }
    return query;
  }

  async list(
    accountId: string,
    filter: ContactFilter,
    page: PageRequest,
  ): Promise<{ rows: ContactRecord[]; total: number }> {
    const filtered = Object.values(filter).some((v) => v !== undefined);
    const offset = (page.page - 1) * page.limit;
    let total: Promise<number>;
    let from = this.filtered(accountId, filter);
    const term = searchedAlone(filter);
    if (term !== undefined) {
      const found = searchFound(this.db, accountId, term);
      const [ids, size] = await Promise.all([found.ids, this.counted(accountId, {})!]);
      if (ids !== null && offset >= ids.length) return { rows: [], total: ids.length };
      // With the matches in hand, their page costs n lookups; walking the newest contacts until
      // the page is full checks about (offset + limit) × size / n of them, and is the way when
      // the matches are too many to bring (then counted meanwhile).
      from =
        ids !== null && ids.length * ids.length <= (offset + page.limit) * size
          ? this.db
              .selectFrom('contacts')
              .where('account_id', '=', accountId)
              .where(sql<boolean>`id = ANY(${ids}::text[])`)
          : this.filtered(accountId, filter, 'scan');
      total = ids !== null ? Promise.resolve(ids.length) : found.count;
    } else {
      total =
        this.counted(accountId, filter) ??
        this.filtered(accountId, filter)
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .modifyEnd(CUSTOM_PLAN)
          .executeTakeFirstOrThrow()
          .then((r) => Number(r.n));
    }
    // The page's ids first, from an index alone, then only their rows: selected in one go,
    // the columns (the identities' subquery too) would be made for every row an offset skips.
    const ids = from
      .select('id')
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset(offset);
    const [rows, n] = await Promise.all([
      this.db
        .selectFrom('contacts')
        .select(CONTACT_COLUMNS)
        .select(IDENTITIES)
        .where('account_id', '=', accountId)
        .where('id', 'in', ids)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .$if(filtered, (q) => q.modifyEnd(CUSTOM_PLAN))
        .execute(),
      total,
    ]);
    return { rows, total: n };
  }

  /**
   * The total of a list filtered by tag and lifecycle stage only, or by channel only, or not at
   * all: sums of contact_counts and contact_tag_counts (migration 034) or contact_channel_counts
   * (migration 039). Null for any other filter, which is counted.
   */
  private counted(accountId: string, filter: ContactFilter): Promise<number> | null {
    const { tag, lifecycle_stage: stage, channel, search } = filter;
    if (search !== undefined) return null;
    if (channel !== undefined) {
      if (tag !== undefined || stage !== undefined) return null;
      return this.db
        .selectFrom('contact_channel_counts')
        .select(sql<string>`coalesce(sum(n), 0)`.as('n'))
        .where('account_id', '=', accountId)
        .where('channel', '=', channel)
        .executeTakeFirstOrThrow()
        .then((r) => Number(r.n));
    }
    const n = sql<string>`coalesce(sum(n), 0)`.as('n');
    let row: Promise<{ n: string }>;
    if (tag === undefined) {
      let q = this.db.selectFrom('contact_counts').select(n).where('account_id', '=', accountId);
      if (stage !== undefined) q = q.where('lifecycle_stage', '=', stage);
      row = q.executeTakeFirstOrThrow();
    } else {
      let q = this.db
        .selectFrom('contact_tag_counts')
        .select(n)
        .where('account_id', '=', accountId)
        .where('tag', '=', tag);
      if (stage !== undefined) q = q.where('lifecycle_stage', '=', stage);
      row = q.executeTakeFirstOrThrow();
    }
    return row.then((r) => Number(r.n));
  }

  /**
   * A page of an export, newest first, after `cursor` (keyset: each page is an index range,
   * however deep into the list it is).
   */
  async exportPage(
    accountId: string,
    filter: ContactFilter,
    cursor: ContactCursor | null,
    limit: number,
  ): Promise<ExportRow[]> {
    // The cursor's time as PostgreSQL writes it: microseconds, which a Date would lose. Only
    // the exported columns: two dates parsed a row cost a sixth of an export's time.
    return this.filtered(accountId, filter)
      .select(['id', 'phone', 'name', 'email', 'tags', 'lifecycle_stage', 'custom_fields'])
      .select(sql<string>`created_at::text`.as('cursor_at'))
      .$if(cursor !== null, (q) =>
        q.where(
          sql<boolean>`(created_at, id) < (${cursor!.created_at}::timestamptz, ${cursor!.id})`,
        ),
      )
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .modifyEnd(CUSTOM_PLAN)
      .execute();
  }

  /** Every custom field key of the contacts the filter passes, in order. */
  async customFieldKeys(accountId: string, filter: ContactFilter): Promise<string[]> {
    const rows = await sql<{ key: string }>`
      SELECT DISTINCT jsonb_object_keys(custom_fields) AS key
      FROM (${this.filtered(accountId, filter)
        .select('custom_fields')
        .where(sql<boolean>`custom_fields <> '{}'::jsonb`)}) f
      ORDER BY key`.execute(this.db);
    return rows.rows.map((r) => r.key);
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
    const accountId = rows[0]!.account_id;
    // One JSON parameter rather than ten a row: a statement of 10,000 parameters cost the
    // import of 1,000 rows twice the time of the same rows read from one document.
    const values = rows.map((r) => ({
      id: r.id,
      phone: r.phone,
      name: r.name,
      email: r.email,
      tags: r.tags,
      lifecycle_stage: r.lifecycle_stage,
      custom_fields: r.custom_fields,
      created_at: r.created_at,
      updated_at: r.updated_at,
    }));
    const inserted = await sql<{ id: string }>`
      INSERT INTO contacts (account_id, id, phone, name, email, tags, lifecycle_stage, custom_fields, created_at, updated_at)
      SELECT ${accountId}, v.id, v.phone, v.name, v.email, v.tags, v.lifecycle_stage, v.custom_fields,
             v.created_at, v.updated_at
      FROM jsonb_to_recordset(${JSON.stringify(values)}::jsonb) AS v(id text, phone text, name text,
        email text, tags text[], lifecycle_stage text, custom_fields jsonb, created_at timestamptz,
        updated_at timestamptz)
      ORDER BY v.phone COLLATE "C"
      ON CONFLICT (account_id, phone) DO NOTHING
      RETURNING id`.execute(trx);
    return new Set(inserted.rows.map((r) => r.id));
  }

  /**
   * The contacts with these phones, locked in id order: as lockByPhone holds them (`key share`,
   * the default: they may not go away), or for an update of their fields (`no key update`). Each
   * phone and then each id is looked up by its unique index on its own: a plan that cannot
   * drift, whatever the table's statistics say (`phone = ANY(...)` is otherwise planned on the
   * trigram index, ~1 ms a phone, or on a scan of the whole account while statistics are stale).
   * A contact whose phone changed meanwhile comes back with its new phone.
   */
  async lockManyByPhone(
    trx: Tx,
    accountId: string,
    phones: string[],
    strength: 'key share' | 'no key update' = 'key share',
  ): Promise<ContactRecord[]> {
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
        FOR ${sql.raw(strength === 'key share' ? 'KEY SHARE' : 'NO KEY UPDATE')}
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

  /** Sets the name of a contact that has none: the contact named, or undefined when it has one or is gone. */
  async nameIfUnnamed(
    trx: Tx,
    accountId: string,
    id: string,
    name: string,
    now: Date,
  ): Promise<ContactRecord | undefined> {
    return trx
      .updateTable('contacts')
      .set({ name, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('name', 'is', null)
      .returning(CONTACT_COLUMNS)
      .returning(IDENTITIES)
      .executeTakeFirst();
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
