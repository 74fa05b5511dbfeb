import { sql, type Selectable } from 'kysely';
import { CUSTOM_PLAN, type Db, type Tx } from '../db/database.js';
import type { ContactsTable, CustomFieldValue } from '../db/schema.js';
import { offsetOf, type PageRequest } from '../http/pagination.js';

export type ContactRow = Selectable<ContactsTable>;

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
  phone?: string;
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
  ): Promise<(ContactRow | undefined)[]> {
    const rows = await this.db
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
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
  ): Promise<ContactRow | undefined> {
    return trx
      .selectFrom('contacts')
      .select(CONTACT_COLUMNS)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async update(
    trx: Tx,
    accountId: string,
    id: string,
    changes: ContactChanges,
  ): Promise<ContactRow | undefined> {
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
      .returningAll()
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
  ): Promise<{ rows: ContactRow[]; total: number }> {
    let query = this.db.selectFrom('contacts').where('account_id', '=', accountId);
    if (filter.tag !== undefined) {
      query = query.where(sql<boolean>`tags @> ARRAY[${filter.tag}]::text[]`);
    }
    if (filter.search !== undefined) {
      const pattern = containsPattern(filter.search);
      // Both columns carry trigram indexes, so a partial match stays an index scan at scale.
      query = query.where((eb) =>
        eb.or([eb('name', 'ilike', pattern), eb('phone', 'ilike', pattern)]),
      );
    }
    const filtered = filter.tag !== undefined || filter.search !== undefined;
    const [rows, count] = await Promise.all([
      query
        .select(CONTACT_COLUMNS)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(page.limit)
        .offset(offsetOf(page))
        .$if(filtered, (q) => q.modifyEnd(CUSTOM_PLAN))
        .execute(),
      query.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.n) };
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

  async findByPhone(trx: Tx, accountId: string, phone: string): Promise<ContactRow | undefined> {
    return trx
      .selectFrom('contacts')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('phone', '=', phone)
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
    const query = this.db.selectFrom('tags').where('account_id', '=', accountId);
    const [rows, count] = await Promise.all([
      query
        .select(['name', 'created_at'])
        .orderBy('name')
        .limit(page.limit)
        .offset(offsetOf(page))
        .execute(),
      query.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
    ]);
    return { rows, total: Number(count.n) };
  }
}
