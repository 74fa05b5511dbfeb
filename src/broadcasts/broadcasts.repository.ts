import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../db/database.js';
import { paged, type Paged } from '../db/paged.js';
import type {
  BroadcastAudience,
  BroadcastStatus,
  BroadcastsTable,
  Channel,
  MessageStatus,
} from '../db/schema.js';
import type { PageRequest } from '../http/pagination.js';

/** A broadcast as the service reads it (the time of its last progress event is the repository's). */
export type BroadcastRow = Omit<Selectable<BroadcastsTable>, 'progress_event_at'>;

type Count = 'sent' | 'delivered' | 'read' | 'replied' | 'failed';
export type StatsDelta = Partial<Record<Count, number>>;

/** Rows a broadcast's counts are spread over at most; a connection adds to one of them. */
const COUNTER_SLOTS = 16;

const broadcasts = (db: Db | Tx) => db.selectFrom('broadcasts as b');

/** `broadcast.updated` is recorded at most this often per broadcast (DESIGN §5, Fixed details). */
export const PROGRESS_EVENT_EVERY_MS = 1000;

/** A recipient as the recipients list shows it. */
export interface RecipientRow {
  contact_id: string;
  message_id: string | null;
  status: MessageStatus;
  failure_reason: string | null;
  replied: boolean;
}

/** The contacts an audience matches, by the rules a broadcast sends by (and its preview counts). */
function audienceOf(db: Db | Tx, accountId: string, audience: BroadcastAudience) {
  let q = db.selectFrom('contacts').where('account_id', '=', accountId);
  if (audience.tags) q = q.where(sql<boolean>`tags && ${audience.tags}::text[]`);
  if (audience.lifecycle_stage) q = q.where('lifecycle_stage', '=', audience.lifecycle_stage);
  return q;
}

/**
 * Broadcasts with their counts: the row's own (counts before migration 013) plus every slot's,
 * read in the same statement so that status and counts come from one snapshot.
 */
function counted(from: ReturnType<typeof broadcasts>) {
  const total = (count: Count) =>
    sql<number>`(b.${sql.ref(count)} + coalesce(s.${sql.ref(count)}, 0))::int`.as(count);
  return from
    .leftJoinLateral(
      (eb) =>
        eb
          .selectFrom('broadcast_counters as c')
          .select([
            sql<number>`sum(c.sent)`.as('sent'),
            sql<number>`sum(c.delivered)`.as('delivered'),
            sql<number>`sum(c.read)`.as('read'),
            sql<number>`sum(c.replied)`.as('replied'),
            sql<number>`sum(c.failed)`.as('failed'),
          ])
          .whereRef('c.account_id', '=', 'b.account_id')
          .whereRef('c.broadcast_id', '=', 'b.id')
          .as('s'),
      (join) => join.onTrue(),
    )
    .select([
      'b.account_id',
      'b.id',
      'b.name',
      'b.channel',
      'b.audience',
      'b.message',
      'b.status',
      'b.scheduled_at',
      'b.started_at',
      'b.completed_at',
      'b.audience_done_at',
      'b.rendered_content',
      'b.failure_reason',
      'b.cursor',
      'b.created_at',
      'b.updated_at',
      total('sent'),
      total('delivered'),
      total('read'),
      total('replied'),
      total('failed'),
    ]);
}

export class BroadcastsRepository {
  constructor(private readonly db: Db) {}

  async insert(trx: Tx, row: BroadcastRow): Promise<void> {
    await trx
      .insertInto('broadcasts')
      .values({
        ...row,
        audience: JSON.stringify(row.audience),
        message: JSON.stringify(row.message),
      })
      .execute();
  }

  /** The broadcast with its counts (see `counted`); in `trx` when given. */
  async find(accountId: string, id: string, trx?: Tx): Promise<BroadcastRow | undefined> {
    return counted(broadcasts(trx ?? this.db))
      .where('b.account_id', '=', accountId)
      .where('b.id', '=', id)
      .executeTakeFirst();
  }

  /** The broadcast with its counts, its row locked until the transaction ends. */
  async lock(trx: Tx, accountId: string, id: string): Promise<BroadcastRow | undefined> {
    return counted(broadcasts(trx))
      .where('b.account_id', '=', accountId)
      .where('b.id', '=', id)
      .forUpdate('b')
      .executeTakeFirst();
  }

  async update(
    trx: Tx,
    accountId: string,
    id: string,
    patch: Partial<Omit<BroadcastRow, 'account_id' | 'id' | 'audience' | 'message' | Count>>,
  ): Promise<void> {
    await trx
      .updateTable('broadcasts')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .execute();
  }

  async list(
    accountId: string,
    status: BroadcastStatus | undefined,
    page: PageRequest,
  ): Promise<{ rows: BroadcastRow[]; total: number }> {
    let q = broadcasts(this.db).where('b.account_id', '=', accountId);
    if (status) q = q.where('b.status', '=', status);
    return paged(q, page, (q) =>
      counted(q).orderBy('b.created_at', 'desc').orderBy('b.id', 'desc'),
    );
  }

  /**
   * Adds to the broadcast's counts, in the slot of the transaction's connection (see migration
   * 013): the broadcast's row is not touched, so recording one batch's answers never waits for
   * the transaction queueing the next, which holds that row locked. Each message moves each
   * count at most once (statuses only move forward).
   */
  async addStats(
    trx: Tx,
    accountId: string,
    id: string,
    delta: StatsDelta,
    _now: Date,
  ): Promise<void> {
    const d = (count: Count) => delta[count] ?? 0;
    await sql`
      INSERT INTO broadcast_counters AS c (account_id, broadcast_id, slot, sent, delivered, read, replied, failed)
      VALUES (${accountId}, ${id}, pg_backend_pid() % ${COUNTER_SLOTS}, ${d('sent')}, ${d('delivered')},
              ${d('read')}, ${d('replied')}, ${d('failed')})
      ON CONFLICT (account_id, broadcast_id, slot) DO UPDATE SET
        sent = c.sent + excluded.sent, delivered = c.delivered + excluded.delivered,
        read = c.read + excluded.read, replied = c.replied + excluded.replied,
        failed = c.failed + excluded.failed`.execute(trx);
  }

  /**
   * The next audience batch in contact-id order: contacts that existed when sending started
   * (the audience is resolved then), after the cursor.
   */
  async nextAudienceBatch(
    trx: Tx,
    accountId: string,
    audience: BroadcastAudience,
    startedAt: Date,
    cursor: string | null,
    limit: number,
  ): Promise<{ id: string }[]> {
    let q = audienceOf(trx, accountId, audience)
      .select(['id'])
      .where('created_at', '<=', startedAt);
    if (cursor) q = q.where('id', '>', cursor);
    return q.orderBy('id').limit(limit).execute();
  }

  /** How many contacts the audience matches now (the preview of a broadcast). */
  async countAudience(accountId: string, audience: BroadcastAudience): Promise<number> {
    const row = await audienceOf(this.db, accountId, audience)
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * A page of the broadcast's recipients in the order they were processed (batches are taken in
   * contact-id order, so the key's order), each with its message's status (a recipient refused
   * before any message was made: `failed`). Without `status` the page is cut from the key alone
   * and only its rows meet their messages; with it, each recipient meets its message by key.
   */
  async recipients(
    accountId: string,
    broadcastId: string,
    status: MessageStatus | undefined,
    page: PageRequest,
  ): Promise<Paged<RecipientRow>> {
    const offset = (page.page - 1) * page.limit;
    const mine = sql`r.account_id = ${accountId} AND r.broadcast_id = ${broadcastId}`;
    const joined = sql`
      broadcast_recipients r
      LEFT JOIN messages m ON m.account_id = r.account_id AND m.id = r.message_id`;
    const columns = sql`r.contact_id, r.message_id, coalesce(m.status, 'failed') AS status,
      coalesce(r.failure_reason, m.failure_reason) AS failure_reason, r.replied_at IS NOT NULL AS replied`;
    let reading: Promise<{ rows: RecipientRow[] }>;
    let counting: Promise<{ rows: { n: string }[] }>;
    if (status) {
      const filtered = sql`${joined} WHERE ${mine} AND coalesce(m.status, 'failed') = ${status}`;
      reading = sql<RecipientRow>`
        SELECT ${columns} FROM ${filtered}
        ORDER BY r.contact_id LIMIT ${page.limit} OFFSET ${offset}`.execute(this.db);
      counting = sql<{ n: string }>`SELECT count(*) AS n FROM ${filtered}`.execute(this.db);
    } else {
      reading = sql<RecipientRow>`
        SELECT ${columns} FROM (
          SELECT * FROM broadcast_recipients r WHERE ${mine}
          ORDER BY r.contact_id LIMIT ${page.limit} OFFSET ${offset}
        ) r
        LEFT JOIN messages m ON m.account_id = r.account_id AND m.id = r.message_id
        ORDER BY r.contact_id`.execute(this.db);
      counting = sql<{ n: string }>`
        SELECT count(*) AS n FROM broadcast_recipients r WHERE ${mine}`.execute(this.db);
    }
    const [rows, count] = await Promise.all([reading, counting]);
    return { rows: rows.rows, total: Number(count.rows[0]!.n) };
  }

  /**
   * Takes the broadcast's turn to announce its progress, when its last `broadcast.updated` is a
   * second old or more: true when taken (the caller records the event in this transaction). Never
   * waits: a broadcast whose row another transaction holds (the one queueing its next batch,
   * which takes the turn itself) is skipped, so recording a batch's answers does not queue behind it.
   */
  async takeProgressTurn(trx: Tx, accountId: string, id: string, now: Date): Promise<boolean> {
    const since = new Date(now.getTime() - PROGRESS_EVENT_EVERY_MS);
    const { rows } = await sql<{ id: string }>`
      UPDATE broadcasts b SET progress_event_at = ${now}
      FROM (
        SELECT account_id, id FROM broadcasts
        WHERE account_id = ${accountId} AND id = ${id}
          AND (progress_event_at IS NULL OR progress_event_at <= ${since})
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE b.account_id = due.account_id AND b.id = due.id
      RETURNING b.id`.execute(trx);
    return rows.length > 0;
  }

  /**
   * Which of these contacts are recipients of the broadcast already. Recipients are only added
   * with the broadcast's row locked (see `addRecipients`), so while the caller holds that lock
   * the answer stays true until it commits. Each contact is looked up by the whole recipient
   * key (the LIMIT in the lateral lookup keeps it so): with `contact_id = ANY(...)` instead, the
   * generic plan of a table without statistics (a first large fan-out) filters every recipient
   * of the broadcast for every batch, and a fan-out becomes quadratic.
   */
  async recipientsAmong(
    trx: Tx,
    accountId: string,
    broadcastId: string,
    contactIds: string[],
  ): Promise<Set<string>> {
    if (contactIds.length === 0) return new Set();
    const { rows } = await sql<{ contact_id: string }>`
      SELECT r.contact_id
      FROM unnest(${contactIds}::text[]) AS c(id)
      CROSS JOIN LATERAL (
        SELECT r.contact_id FROM broadcast_recipients r
        WHERE r.account_id = ${accountId} AND r.broadcast_id = ${broadcastId} AND r.contact_id = c.id
        LIMIT 1
      ) AS r`.execute(trx);
    return new Set(rows.map((r) => r.contact_id));
  }

  /**
   * Takes the account's channel for one batch when it is free (`next_at` reached, give or take
   * `slackMs` of timer lateness): it is then held until `intervalMs` after it was free, so that
   * the broadcasts on one connection share its rate, whichever process sends them. In the batch's
   * transaction: a batch rolled back gives its turn back. Answers 0 when taken, else how long to
   * wait: until `slackMs` before it is free, so that a waiting broadcast comes due before the one
   * holding it (whose next batch is due when it is free) and broadcasts take turns.
   */
  async takePacingSlot(
    trx: Tx,
    accountId: string,
    channel: Channel,
    now: Date,
    intervalMs: number,
    slackMs = 20,
  ): Promise<number> {
    const next = new Date(now.getTime() + intervalMs);
    const free = new Date(now.getTime() + slackMs);
    const taken = await sql<{ next_at: Date }>`
      INSERT INTO channel_pacing AS p (account_id, channel, next_at)
      VALUES (${accountId}, ${channel}, ${next})
      ON CONFLICT (account_id, channel)
      DO UPDATE SET next_at = greatest(p.next_at, ${now}) + make_interval(secs => ${intervalMs / 1000})
      WHERE p.next_at <= ${free}
      RETURNING p.next_at`.execute(trx);
    if (taken.rows.length > 0) return 0;
    const held = await trx
      .selectFrom('channel_pacing')
      .select('next_at')
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .executeTakeFirst();
    return held ? Math.max(1, held.next_at.getTime() - now.getTime() - slackMs) : 1;
  }

  /** How long until the account's channel is free for the next batch (0: free now). */
  async pacingWaitMs(accountId: string, channel: Channel, now: Date): Promise<number> {
    const held = await this.db
      .selectFrom('channel_pacing')
      .select('next_at')
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .executeTakeFirst();
    return held ? Math.max(0, held.next_at.getTime() - now.getTime()) : 0;
  }

  /**
   * Whether a message of the broadcast may still be `queued`: a send job of its batches is still
   * alive (a job holding queued messages lives until they are all taken or refused, or it is kept
   * dead with them failed). Reads the small jobs table, so it is cheap to ask again and again.
   */
  async hasLiveSendJobs(trx: Tx, accountId: string, broadcastId: string): Promise<boolean> {
    const row = await trx
      .selectFrom('jobs')
      .select('id')
      .where('account_id', '=', accountId)
      .where('kind', '=', 'message.send')
      .where('dead_at', 'is', null)
      .where(sql<string>`payload->>'broadcast_id'`, '=', broadcastId)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Whether a message of the broadcast is still `queued`, read from the messages themselves
   * (through the recipients, whose key reads one broadcast's): exact, whatever wrote the jobs,
   * but a read of every recipient, so asked once, when the jobs say none is left.
   */
  async hasQueuedMessages(trx: Tx, accountId: string, broadcastId: string): Promise<boolean> {
    const row = await trx
      .selectFrom('broadcast_recipients as r')
      .innerJoin('messages as m', (join) =>
        join.onRef('m.account_id', '=', 'r.account_id').onRef('m.id', '=', 'r.message_id'),
      )
      .select('r.contact_id')
      .where('r.account_id', '=', accountId)
      .where('r.broadcast_id', '=', broadcastId)
      .where('m.status', '=', 'queued')
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Adds recipients with their outcomes, in one statement (arrays, so that every batch size is
   * the same prepared statement). The primary key (broadcast, contact) is what makes a second
   * message impossible: a contact already there fails the statement, and so the whole batch,
   * rather than being messaged again. Written once with the outcome, rather than claimed first
   * and updated once its message exists, a row costs one heap tuple and one entry per index
   * instead of two, and no statement has to find a batch's rows again in a table whose
   * statistics may still describe it as empty (a first large broadcast fills it).
   */
  async addRecipients(
    trx: Tx,
    accountId: string,
    broadcastId: string,
    recipients: {
      contactId: string;
      conversationId: string | null;
      messageId: string | null;
      failureReason: string | null;
    }[],
    now: Date,
  ): Promise<void> {
    if (recipients.length === 0) return;
    await sql`
      INSERT INTO broadcast_recipients
        (account_id, broadcast_id, contact_id, conversation_id, message_id, failure_reason, created_at)
      SELECT ${accountId}, ${broadcastId}, r.contact_id, r.conversation_id, r.message_id, r.failure_reason, ${now}
      FROM unnest(${recipients.map((r) => r.contactId)}::text[], ${recipients.map((r) => r.conversationId)}::text[],
                  ${recipients.map((r) => r.messageId)}::text[], ${recipients.map((r) => r.failureReason)}::text[])
        AS r(contact_id, conversation_id, message_id, failure_reason)`.execute(trx);
  }

  /**
   * Marks the first reply on a conversation for every broadcast awaiting one there, whose message
   * was sent (the provider took it: not one still queued, or refused) before the reply; returns
   * their ids.
   */
  async markReplied(
    trx: Tx,
    accountId: string,
    conversationIds: string[],
    now: Date,
  ): Promise<string[]> {
    if (conversationIds.length === 0) return [];
    const rows = await trx
      .updateTable('broadcast_recipients as r')
      .set({ replied_at: now })
      .where('r.account_id', '=', accountId)
      .where('r.conversation_id', '=', (eb) => eb.fn.any(eb.val(conversationIds)))
      .where('r.replied_at', 'is', null)
      .where('r.message_id', 'is not', null)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('messages as m')
            .select('m.id')
            .whereRef('m.account_id', '=', 'r.account_id')
            .whereRef('m.id', '=', 'r.message_id')
            .where('m.status', 'in', ['sent', 'delivered', 'read'])
            .where('m.created_at', '<=', now),
        ),
      )
      .returning('r.broadcast_id')
      .execute();
    return rows.map((r) => r.broadcast_id);
  }
}
