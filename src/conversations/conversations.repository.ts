import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import type { Channel, ConversationsTable, NotesTable } from '../db/schema.js';
import { paged } from '../db/paged.js';
import type { PageRequest } from '../http/pagination.js';
import { newId } from '../ids.js';

/** A conversation's newest message and unread count (see `summaries`). */
export interface ConversationSummary {
  last_message: {
    id: string;
    direction: 'inbound' | 'outbound';
    type: string;
    content: string | null;
    status: string;
    created_at: string;
  } | null;
  unread_count: number;
}

export type ConversationRow = Selectable<ConversationsTable>;
export type NoteRow = Selectable<NotesTable>;

export interface ConversationFilter {
  status: 'open' | 'resolved' | 'all';
  channel?: Channel;
  assignedTo?: string;
  /** Only those assigned to nobody. */
  unassigned?: boolean;
  /** Only those assigned to this user (not to their teams). */
  mine?: string;
  /** Only those whose contact matches this search (see contactSearch). */
  q?: string;
  contactId?: string;
}

export class ConversationsRepository {
  constructor(private readonly db: Db) {}

  async find(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<ConversationRow | undefined> {
    return trx
      .selectFrom('conversations')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async lock(trx: Tx, accountId: string, id: string): Promise<ConversationRow | undefined> {
    return trx
      .selectFrom('conversations')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
  }

  /**
   * The conversations of these contacts on one channel, created where missing and otherwise
   * reopened and touched (sending or receiving is activity), locked, keyed by contact id. One
   * statement: the upsert locks each row it inserts or updates, in contact id order, the order
   * every multi-row lock of conversations takes, so concurrent batches never deadlock. The
   * unique key makes concurrent first messages share one conversation.
   */
  async openMany(
    trx: Tx,
    accountId: string,
    contactIds: string[],
    channel: Channel,
    now: Date,
    opts: {
      inbound?: boolean;
      /** With `inbound`: when each contact's window opens, if earlier than now (by contact id). */
      inboundAt?: ReadonlyMap<string, Date>;
    } = {},
  ): Promise<Map<string, ConversationRow>> {
    if (contactIds.length === 0) return new Map();
    // The contacts wrote: their 24-hour windows open now too (or when the provider says they
    // wrote), never earlier than a window already open.
    const lastInbound = opts.inbound
      ? sql<Date>`greatest(conversations.last_inbound_at, excluded.last_inbound_at)`
      : null;
    const rows = await trx
      .insertInto('conversations')
      .values(
        [...new Set(contactIds)].sort().map((contactId) => ({
          account_id: accountId,
          id: newId('conv'),
          contact_id: contactId,
          channel,
          status: 'open' as const,
          assignee_type: null,
          assignee_id: null,
          last_inbound_at: opts.inbound ? (opts.inboundAt?.get(contactId) ?? now) : null,
          created_at: now,
          updated_at: now,
        })),
      )
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'contact_id', 'channel'])
          .doUpdateSet(
            lastInbound
              ? { status: 'open', updated_at: now, last_inbound_at: lastInbound }
              : { status: 'open', updated_at: now },
          ),
      )
      .returningAll()
      .execute();
    return new Map(rows.map((r) => [r.contact_id, r]));
  }

  /** The existing conversations of these contacts on one channel, locked, keyed by contact id. */
  async lockExisting(
    trx: Tx,
    accountId: string,
    contactIds: string[],
    channel: Channel,
  ): Promise<Map<string, ConversationRow>> {
    if (contactIds.length === 0) return new Map();
    const rows = await trx
      .selectFrom('conversations')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .where('contact_id', 'in', contactIds)
      .orderBy('contact_id')
      .forUpdate()
      .execute();
    return new Map(rows.map((r) => [r.contact_id, r]));
  }

  /** Sending counts as activity and reopens a resolved conversation. */
  async touchOpen(trx: Tx, accountId: string, ids: string[], now: Date): Promise<void> {
    if (ids.length === 0) return;
    await trx
      .updateTable('conversations')
      .set({ status: 'open', updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', 'in', ids)
      .execute();
  }

  async update(
    trx: Tx,
    accountId: string,
    id: string,
    patch: Partial<
      Pick<
        ConversationRow,
        'status' | 'assignee_type' | 'assignee_id' | 'last_inbound_at' | 'updated_at'
      >
    >,
  ): Promise<ConversationRow> {
    return trx
      .updateTable('conversations')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  async list(
    accountId: string,
    filter: ConversationFilter,
    page: PageRequest,
  ): Promise<{ rows: ConversationRow[]; total: number }> {
    let q = this.db.selectFrom('conversations').where('account_id', '=', accountId);
    if (filter.status !== 'all') q = q.where('status', '=', filter.status);
    if (filter.channel) q = q.where('channel', '=', filter.channel);
    if (filter.assignedTo) q = q.where('assignee_id', '=', filter.assignedTo);
    if (filter.unassigned) q = q.where('assignee_id', 'is', null);
    if (filter.mine)
      q = q.where('assignee_type', '=', 'user').where('assignee_id', '=', filter.mine);
    if (filter.contactId) q = q.where('contact_id', '=', filter.contactId);
    if (filter.q === undefined && filter.contactId === undefined) {
      // Filtered by status, channel and assignee only: the total is the sum of their counters.
      const [rows, total] = await Promise.all([
        q
          .selectAll()
          .orderBy('updated_at', 'desc')
          .orderBy('id', 'desc')
          .limit(page.limit)
          .offset((page.page - 1) * page.limit)
          .execute(),
        this.counted(accountId, filter),
      ]);
      return { rows, total };
    }
    if (filter.q === undefined)
      return paged(q, page, (q) =>
        q.selectAll().orderBy('updated_at', 'desc').orderBy('id', 'desc'),
      );
    // A search: the page's ids and the total in one statement, from the index alone
    // (conversations_recent holds each one's contact, migration 027), then those rows. Selecting
    // every column at once would read every row of the status from the table before matching
    // the contacts, and a count beside it would match them all a second time.
    q = q.where(matchingContacts(accountId, filter.q));
    const ids = await q
      .select(['id', sql<string>`count(*) over ()`.as('total')])
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset((page.page - 1) * page.limit)
      .execute();
    if (ids.length === 0) {
      // Nothing matches, or a page past the last: only then is the total counted apart.
      const count = await q
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .$castTo<{ n: string }>()
        .executeTakeFirstOrThrow();
      return { rows: [], total: Number(count.n) };
    }
    const rows = await this.db
      .selectFrom('conversations')
      .selectAll()
      .where('account_id', '=', accountId)
      .where(
        'id',
        'in',
        ids.map((r) => r.id),
      )
      .orderBy('updated_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return { rows, total: Number(ids[0]!.total) };
  }

  /**
   * What a conversation shows of its messages, for these conversations of the account in one
   * statement: its newest message, and how many inbound messages came after it was last read.
   * Both are read through the conversation's own index entries, however long its history: the
   * unread ones as a range of messages_conversation from last_read_at (an `IS NULL OR` there
   * would make it a filter over the whole history).
   */
  async summaries(
    accountId: string,
    ids: string[],
    trx: Tx | Db = this.db,
  ): Promise<Map<string, ConversationSummary>> {
    if (ids.length === 0) return new Map();
    const { rows } = await sql<ConversationSummary & { id: string }>`
      SELECT c.id,
             CASE WHEN lm.id IS NULL THEN NULL ELSE json_build_object(
               'id', lm.id, 'direction', lm.direction, 'type', lm.type, 'content', lm.content,
               'status', lm.status, 'created_at', lm.created_at
             ) END AS last_message,
             (SELECT count(*)::int FROM messages m
              WHERE m.account_id = c.account_id AND m.conversation_id = c.id
                AND m.direction = 'inbound'
                AND m.created_at > coalesce(c.last_read_at, '-infinity')) AS unread_count
      FROM (SELECT DISTINCT id FROM unnest(${ids}::text[]) AS w(id)) w
      JOIN conversations c ON c.account_id = ${accountId} AND c.id = w.id
      LEFT JOIN LATERAL (
        SELECT m.id, m.direction, m.type, m.content, m.status, m.created_at FROM messages m
        WHERE m.account_id = c.account_id AND m.conversation_id = c.id
        ORDER BY m.created_at DESC, m.id DESC
        LIMIT 1
      ) lm ON true`.execute(trx);
    return new Map(rows.map(({ id, ...summary }) => [id, summary]));
  }

  /** Marks it read now, when an inbound message came after it was last read; the row if so. */
  async markRead(
    trx: Tx,
    accountId: string,
    id: string,
    now: Date,
  ): Promise<ConversationRow | undefined> {
    return trx
      .updateTable('conversations as c')
      .set({ last_read_at: now })
      .where('c.account_id', '=', accountId)
      .where('c.id', '=', id)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('messages as m')
            .select('m.id')
            .whereRef('m.account_id', '=', 'c.account_id')
            .whereRef('m.conversation_id', '=', 'c.id')
            .where('m.direction', '=', 'inbound')
            // A range of the conversation's index entries, not a filter over its history.
            .where('m.created_at', '>', sql<Date>`coalesce(c.last_read_at, '-infinity')`),
        ),
      )
      .returningAll()
      .executeTakeFirst();
  }

  /**
   * The account's open conversations (on one channel when given), how many are unassigned and,
   * for a signed-in user, how many are theirs: sums of conversation_counts (migration 028), one
   * range of its key whatever the number of conversations.
   */
  async openCounts(
    accountId: string,
    channel: Channel | undefined,
    userId: string | null,
  ): Promise<{ mine: number | null; unassigned: number; all: number }> {
    let q = this.db
      .selectFrom('conversation_counts')
      .where('account_id', '=', accountId)
      .where('status', '=', 'open');
    if (channel) q = q.where('channel', '=', channel);
    const row = await q
      .select([
        sql<string>`coalesce(sum(n), 0)`.as('all'),
        sql<string>`coalesce(sum(n) FILTER (WHERE assignee_type = ''), 0)`.as('unassigned'),
        sql<string>`coalesce(sum(n) FILTER (WHERE assignee_type = 'user' AND assignee_id = ${userId ?? ''}), 0)`.as(
          'mine',
        ),
      ])
      .executeTakeFirstOrThrow();
    return {
      mine: userId === null ? null : Number(row.mine),
      unassigned: Number(row.unassigned),
      all: Number(row.all),
    };
  }

  /** How many conversations a list filtered by status, channel and assignee only holds. */
  private async counted(accountId: string, filter: ConversationFilter): Promise<number> {
    let q = this.db.selectFrom('conversation_counts').where('account_id', '=', accountId);
    if (filter.status !== 'all') q = q.where('status', '=', filter.status);
    if (filter.channel) q = q.where('channel', '=', filter.channel);
    if (filter.assignedTo) q = q.where('assignee_id', '=', filter.assignedTo);
    if (filter.unassigned) q = q.where('assignee_type', '=', '');
    if (filter.mine)
      q = q.where('assignee_type', '=', 'user').where('assignee_id', '=', filter.mine);
    const row = await q.select(sql<string>`coalesce(sum(n), 0)`.as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Unassigns every conversation of this assignee; answers them as they now are. */
  async unassignAll(
    trx: Tx,
    accountId: string,
    assignee: { type: 'user' | 'team'; id: string },
    now: Date,
  ): Promise<ConversationRow[]> {
    return trx
      .updateTable('conversations')
      .set({ assignee_type: null, assignee_id: null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('assignee_type', '=', assignee.type)
      .where('assignee_id', '=', assignee.id)
      .returningAll()
      .execute();
  }

  async insertNote(trx: Tx | Db, row: NoteRow): Promise<void> {
    await trx
      .insertInto('notes')
      .values({ ...row, author: row.author === null ? null : JSON.stringify(row.author) })
      .execute();
  }

  async listNotes(
    accountId: string,
    conversationId: string,
    page: PageRequest,
  ): Promise<{ rows: NoteRow[]; total: number }> {
    const q = this.db
      .selectFrom('notes')
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId);
    return paged(q, page, (q) => q.selectAll().orderBy('created_at').orderBy('id'));
  }

  async findNote(accountId: string, id: string): Promise<NoteRow | undefined> {
    return this.db
      .selectFrom('notes')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /**
   * Up to `limit` of a conversation's notes older than `before`, newest first, and whether older
   * ones remain: one walk of the conversation's notes index, as the message history is read.
   */
  async notesBefore(
    accountId: string,
    conversationId: string,
    before: { created_at: Date; id: string },
    limit: number,
  ): Promise<{ rows: NoteRow[]; hasMore: boolean }> {
    const rows = await this.db
      .selectFrom('notes')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .where((eb) =>
        eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(before.created_at, before.id)),
      )
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1)
      .execute();
    return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
  }
}

/**
 * `contact_id IN (the account's contacts that match q)`: the start of any word of the name (each
 * word of q the start of one, in any order), or the start of the phone (its digits, whatever the
 * spacing), the email or an identity, ignoring case. Each way is a range of its own index
 * (migrations 025 and 032: a name word is a key of its account).
 */
function matchingContacts(accountId: string, q: string) {
  const term = q.trim().toLowerCase();
  if (term === '') return sql<boolean>`true`;
  // The words as typed: the database lower-cases them as it did the names.
  const words = q
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean)
    .slice(0, 8)
    .join(' ');
  const digits = /^[\d\s().+-]+$/.test(term) ? term.replace(/\D/g, '') : '';
  const range = (column: ReturnType<typeof sql.raw>, prefix: string) =>
    sql`(${column} ~>=~ ${prefix} AND ${column} ~<~ (${prefix} || chr(1114111)))`;
  const email = sql.raw('lower(email)');
  return sql<boolean>`contact_id IN (
    SELECT id FROM contacts
    WHERE account_id = ${accountId} AND (
      ${words === '' ? sql`false` : sql`contact_name_keys(account_id, name) @@ contact_name_query(${accountId}, ${words})`}
      OR ${digits === '' ? sql`false` : sql`(phone IS NOT NULL AND ${range(sql.raw('phone'), `+${digits}`)})`}
      OR (email IS NOT NULL AND ${range(email, term)})
    )
    UNION
    SELECT contact_id FROM contact_identities
    WHERE account_id = ${accountId} AND ${range(sql.raw('lower(external_id)'), term)}
  )`;
}
