import { sql, type Insertable, type Selectable } from 'kysely';
import { FIXED_TEXT, type Db, type Tx } from '../db/database.js';
import type { Channel, JobsTable, MessageStatus, MessagesTable } from '../db/schema.js';
import { addressOn, addressedByPhone } from '../contacts/identities.js';
import { newId } from '../ids.js';
import { deleteHeldJobs, type HeldJob } from '../jobs/job-queue.js';

export type MessageRow = Selectable<MessagesTable>;

/**
 * Which statuses each target may be reached from: statuses only move forward. A report may
 * overtake the provider's own answer (delivered while still queued here).
 */
export const FORWARD_FROM: Record<'delivered' | 'read' | 'failed', MessageStatus[]> = {
  delivered: ['queued', 'sent'],
  read: ['queued', 'sent', 'delivered'],
  failed: ['queued', 'sent', 'delivered'],
};

/** A provider's answer to one queued message, to record. */
export type OutboundRecord =
  | { id: string; status: 'sent'; providerMessageId: string }
  | { id: string; status: 'failed'; reason: string };

/** One send for `queueAtOnce`: its message and the send job that carries it. */
export interface AtOnceSend {
  /** The message, but for its conversation (found or created by the statement). */
  row: Omit<MessageRow, 'conversation_id'>;
  contactId: string;
  channel: Channel;
  /** The sandbox reaches every contact; a real provider only one with an address on the channel. */
  anyContact: boolean;
  job: Insertable<JobsTable>;
}

/** A recipient of `queueAtOnce` as found: where it is reached, and its conversation (when queued). */
export interface AtOnceRecipient {
  accountId: string;
  contactId: string;
  channel: Channel;
  phone: string | null;
  externalId: string | null;
  /** Whether the channel's provider can reach it (the sandbox reaches everyone). */
  reachable: boolean;
  /** Its conversation, when its message was queued. */
  conversationId: string | null;
}

/** A queued message with where it goes. */
export interface QueuedMessage {
  row: MessageRow;
  channel: Channel;
  contactId: string;
  /** Null when the contact has none, or has since been deleted. */
  phone: string | null;
  /**
   * The contact's id on the conversation's channel (see OutboundMessage.to.identity); null
   * when it has none there, or has since been deleted.
   */
  identity: string | null;
}

function forInsert(row: MessageRow) {
  return {
    ...row,
    template_params: row.template_params === null ? null : JSON.stringify(row.template_params),
  };
}

export class MessagesRepository {
  constructor(private readonly db: Db) {}

  async insertMany(trx: Tx, rows: MessageRow[]): Promise<void> {
    if (rows.length > 0) await trx.insertInto('messages').values(rows.map(forInsert)).execute();
  }

  /** Queued messages and the jobs that send them, in one statement. */
  async insertWithJobs(trx: Tx, rows: MessageRow[], jobs: Insertable<JobsTable>[]): Promise<void> {
    if (rows.length === 0) return;
    if (jobs.length === 0) return this.insertMany(trx, rows);
    await trx
      .with('queued', (db) => db.insertInto('messages').values(rows.map(forInsert)))
      .insertInto('jobs')
      .values(jobs)
      .execute();
  }

  /**
   * Queues API sends in one statement, atomic without a transaction: each recipient's contact
   * locked FOR KEY SHARE (none is merged away or deleted meanwhile) with its address on the
   * channel; for a recipient the provider can reach, its conversation reopened and touched, and
   * its message inserted with the send job that carries it. All the sends are of one kind:
   * - `windowStart` null: sends that open their conversation whatever its 24-hour window
   *   (templates where the provider allows them outside it, webchat): the conversation is
   *   found or created;
   * - else sends that need the window: only an existing conversation whose contact last wrote
   *   after `windowStart` takes the message.
   * `MessagesService.queue` does the same in several statements inside a transaction; this is
   * its path for API sends, where one round trip instead of five is most of a send's cost.
   * Rows are locked in the order `queue` locks them (account, channel, contact; contacts
   * first, then conversations), so the two never deadlock. Answers every recipient found (one
   * not found is gone), with its conversation when its message was queued.
   */
  async queueAtOnce(
    db: Tx | Db,
    sends: AtOnceSend[],
    now: Date,
    windowStart: Date | null,
  ): Promise<AtOnceRecipient[]> {
    if (sends.length === 0) return [];
    const targets = new Map<string, AtOnceSend>();
    for (const s of sends)
      targets.set([s.row.account_id, s.channel, s.contactId].join('\u0000'), s);
    const t = [...targets.values()];
    const conversationIds = t.map(() => newId('conv'));
    const params = (pick: (r: AtOnceSend['row']) => unknown) => sends.map((s) => pick(s.row));
    const result = await sql<{
      account_id: string;
      contact_id: string;
      channel: Channel;
      phone: string | null;
      external_id: string | null;
      reachable: boolean;
      conversation_id: string | null;
    }>`
      WITH target AS (
        SELECT account_id, contact_id, channel, conversation_id, any_contact, by_phone
        FROM unnest(${t.map((s) => s.row.account_id)}::text[], ${t.map((s) => s.contactId)}::text[],
                    ${t.map((s) => s.channel)}::text[], ${conversationIds}::text[],
                    ${t.map((s) => s.anyContact)}::boolean[],
                    ${t.map((s) => addressedByPhone(s.channel))}::boolean[])
          AS v(account_id, contact_id, channel, conversation_id, any_contact, by_phone)
      ),
      address AS MATERIALIZED (
        SELECT ct.account_id, ct.id AS contact_id, t.channel, t.conversation_id, ct.phone,
               ci.external_id,
               t.any_contact OR CASE WHEN t.by_phone THEN ct.phone ELSE ci.external_id END
                 IS NOT NULL AS reachable
        FROM target t
        JOIN contacts ct ON ct.account_id = t.account_id AND ct.id = t.contact_id
        LEFT JOIN contact_identities ci
          ON ci.account_id = ct.account_id AND ci.contact_id = ct.id AND ci.channel = t.channel
        ORDER BY ct.account_id, t.channel COLLATE "C", ct.id
        FOR KEY SHARE OF ct
      ),
      existing AS MATERIALIZED (
        SELECT c.account_id, c.id, c.last_inbound_at
        FROM address a
        JOIN conversations c
          ON c.account_id = a.account_id AND c.contact_id = a.contact_id AND c.channel = a.channel
        WHERE ${windowStart !== null} AND a.reachable
        ORDER BY c.account_id, c.channel COLLATE "C", c.contact_id
        FOR UPDATE OF c
      ),
      touched AS (
        UPDATE conversations c SET status = 'open', updated_at = ${now}
        FROM existing e
        WHERE c.account_id = e.account_id AND c.id = e.id
          AND e.last_inbound_at > ${windowStart}::timestamptz
        RETURNING c.account_id, c.id, c.contact_id, c.channel
      ),
      opened AS (
        INSERT INTO conversations
          (account_id, id, contact_id, channel, status, created_at, updated_at)
        SELECT account_id, conversation_id, contact_id, channel, 'open', ${now}, ${now}
        FROM address WHERE ${windowStart === null} AND reachable
        ORDER BY account_id, channel COLLATE "C", contact_id
        ON CONFLICT (account_id, contact_id, channel)
          DO UPDATE SET status = 'open', updated_at = EXCLUDED.updated_at
        RETURNING account_id, id, contact_id, channel
      ),
      conversation AS (
        SELECT account_id, id, contact_id, channel FROM touched
        UNION ALL SELECT account_id, id, contact_id, channel FROM opened
      ),
      send AS (
        SELECT account_id, id, contact_id, channel, type, content, media_url, template_name,
               template_language, template_params, job_id, job_kind, job_payload, job_run_at,
               job_locked_until, job_attempts, job_created_at
        FROM unnest(${params((r) => r.account_id)}::text[], ${params((r) => r.id)}::text[],
                    ${sends.map((s) => s.contactId)}::text[], ${sends.map((s) => s.channel)}::text[],
                    ${params((r) => r.type)}::text[], ${params((r) => r.content)}::text[],
                    ${params((r) => r.media_url)}::text[], ${params((r) => r.template_name)}::text[],
                    ${params((r) => r.template_language)}::text[],
                    ${params((r) => (r.template_params === null ? null : JSON.stringify(r.template_params)))}::jsonb[],
                    ${sends.map((s) => s.job.id)}::text[], ${sends.map((s) => s.job.kind)}::text[],
                    ${sends.map((s) => s.job.payload)}::jsonb[],
                    ${sends.map((s) => s.job.run_at)}::timestamptz[],
                    ${sends.map((s) => s.job.locked_until ?? null)}::timestamptz[],
                    ${sends.map((s) => s.job.attempts ?? 0)}::int[],
                    ${sends.map((s) => s.job.created_at)}::timestamptz[])
          AS v(account_id, id, contact_id, channel, type, content, media_url, template_name,
               template_language, template_params, job_id, job_kind, job_payload, job_run_at,
               job_locked_until, job_attempts, job_created_at)
      ),
      message AS (
        INSERT INTO messages
          (account_id, id, conversation_id, direction, type, content, media_url, template_name,
           template_language, template_params, status, created_at, updated_at)
        SELECT s.account_id, s.id, c.id, 'outbound', s.type, s.content, s.media_url,
               s.template_name, s.template_language, s.template_params, 'queued', ${now}, ${now}
        FROM send s
        JOIN conversation c
          ON c.account_id = s.account_id AND c.contact_id = s.contact_id AND c.channel = s.channel
        RETURNING account_id, id
      ),
      job AS (
        INSERT INTO jobs (account_id, id, kind, payload, run_at, created_at, locked_until, attempts)
        SELECT s.account_id, s.job_id, s.job_kind, s.job_payload, s.job_run_at, s.job_created_at,
               s.job_locked_until, s.job_attempts
        FROM send s JOIN message m ON m.account_id = s.account_id AND m.id = s.id
      )
      SELECT a.account_id, a.contact_id, a.channel, a.phone, a.external_id, a.reachable,
             c.id AS conversation_id
      FROM address a
      LEFT JOIN conversation c
        ON c.account_id = a.account_id AND c.contact_id = a.contact_id AND c.channel = a.channel
      ${FIXED_TEXT}`.execute(db);
    return result.rows.map((r) => ({
      accountId: r.account_id,
      contactId: r.contact_id,
      channel: r.channel,
      phone: r.phone,
      externalId: r.external_id,
      reachable: r.reachable,
      conversationId: r.conversation_id,
    }));
  }

  /** Inserts an inbound message unless its provider id is already recorded; false if it was. */
  async insertInbound(trx: Tx, row: MessageRow): Promise<boolean> {
    const r = await trx
      .insertInto('messages')
      .values(forInsert(row))
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'provider_message_id'])
          .where('provider_message_id', 'is not', null)
          .doNothing(),
      )
      .executeTakeFirst();
    return (r.numInsertedOrUpdatedRows ?? 0n) > 0n;
  }

  /**
   * Inserts inbound messages, skipping any whose provider id is already recorded (a concurrent
   * delivery of the same webhook); returns the ids of the rows inserted.
   */
  async insertInboundMany(trx: Tx, rows: MessageRow[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const inserted = await trx
      .insertInto('messages')
      .values(rows.map(forInsert))
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'provider_message_id'])
          .where('provider_message_id', 'is not', null)
          .doNothing(),
      )
      .returning('id')
      .execute();
    return new Set(inserted.map((r) => r.id));
  }

  /**
   * Records provider answers on messages still `queued` (a message a report already moved on
   * keeps its status, but learns its provider id), and deletes the send jobs they finish, in
   * one statement (atomic on its own, for a caller without a transaction); returns what changed.
   * `after` are jobs about one message each (the sandbox's simulated reports), written in the
   * same statement only for the messages this moves on from `queued`.
   */
  async recordOutcomes(
    trx: Tx | Db,
    accountId: string,
    records: OutboundRecord[],
    now: Date,
    finished: HeldJob[] = [],
    after: { messageId: string; job: Insertable<JobsTable> }[] = [],
  ): Promise<{ row: MessageRow; from: MessageStatus }[]> {
    if (records.length === 0) {
      if (finished.length > 0) await deleteHeldJobs(finished).execute(trx);
      return [];
    }
    // Each row names its message by the whole key (account, id), and the join is on both: with
    // the account as a constant, a table without statistics yet (a first large broadcast fills
    // it) is estimated at a few hundred rows for the account, and the plan read every message
    // of the account for each batch (quadratic: 50-250 ms a batch of 500 at 100,000 messages).
    const values = sql.join(
      records.map(
        (r) =>
          sql`(${accountId}, ${r.id}, ${r.status}, ${r.status === 'sent' ? r.providerMessageId : null}, ${r.status === 'failed' ? r.reason.slice(0, 2000) : null})`,
      ),
    );
    const update = sql`
      UPDATE messages m SET
        status = CASE WHEN old.status = 'queued' THEN v.status ELSE m.status END,
        failure_reason = CASE WHEN old.status = 'queued' THEN v.failure_reason ELSE m.failure_reason END,
        provider_message_id = COALESCE(m.provider_message_id, v.provider_message_id),
        updated_at = ${now}
      FROM v JOIN old ON old.id = v.id
      WHERE m.account_id = v.account_id AND m.id = v.id
        AND (old.status = 'queued' OR (m.provider_message_id IS NULL AND v.provider_message_id IS NOT NULL))
      RETURNING m.*, old.status AS from_status`;
    const result = await sql<MessageRow & { from_status: MessageStatus }>`
      WITH v (account_id, id, status, provider_message_id, failure_reason) AS (VALUES ${values}),
      old AS (
        SELECT m.id, m.status FROM messages m JOIN v ON m.account_id = v.account_id AND m.id = v.id
        FOR UPDATE OF m
      )${finished.length > 0 ? sql`, finished AS (${deleteHeldJobs(finished)})` : sql``}
      ${
        after.length === 0
          ? update
          : sql`, changed AS (${update}), after AS (${insertJobsAfter(after)})
      SELECT * FROM changed`
      }`.execute(trx);
    return result.rows
      .filter((r) => r.from_status === 'queued')
      .map(({ from_status, ...row }) => ({ row: row, from: from_status }));
  }

  /** The messages of a send job still waiting for their provider, with their recipients. */
  async findQueued(accountId: string, ids: string[]): Promise<QueuedMessage[]> {
    if (ids.length === 0) return [];
    const rows = await this.db
      .selectFrom('messages as m')
      .innerJoin('conversations as c', (j) =>
        j.onRef('c.account_id', '=', 'm.account_id').onRef('c.id', '=', 'm.conversation_id'),
      )
      .leftJoin('contacts as ct', (j) =>
        j.onRef('ct.account_id', '=', 'c.account_id').onRef('ct.id', '=', 'c.contact_id'),
      )
      // At most one identity per contact and channel (contact_identities_contact).
      .leftJoin('contact_identities as ci', (j) =>
        j
          .onRef('ci.account_id', '=', 'c.account_id')
          .onRef('ci.contact_id', '=', 'c.contact_id')
          .onRef('ci.channel', '=', 'c.channel'),
      )
      .selectAll('m')
      .select(['c.channel', 'c.contact_id', 'ct.phone', 'ci.external_id'])
      .where('m.account_id', '=', accountId)
      .where('m.id', 'in', ids)
      .where('m.status', '=', 'queued')
      .orderBy('m.id')
      .execute();
    return rows.map(({ channel, contact_id, phone, external_id, ...row }) => ({
      row: row,
      channel,
      contactId: contact_id,
      phone: phone ?? null,
      identity: addressOn(channel, phone ?? null, external_id ?? null),
    }));
  }

  /** The conversation on `channel` of the contact with this identity there, if any. */
  async conversationOfIdentity(
    trx: Tx,
    accountId: string,
    channel: Channel,
    identity: string,
  ): Promise<string | undefined> {
    // WhatsApp has no stored identities (its identity is the phone).
    if (channel === 'whatsapp') return undefined;
    const row = await trx
      .selectFrom('contact_identities as i')
      .innerJoin('conversations as c', (j) =>
        j
          .onRef('c.account_id', '=', 'i.account_id')
          .onRef('c.contact_id', '=', 'i.contact_id')
          .onRef('c.channel', '=', 'i.channel'),
      )
      .select('c.id')
      .where('i.account_id', '=', accountId)
      .where('i.channel', '=', channel)
      .where('i.external_id', '=', identity)
      .executeTakeFirst();
    return row?.id;
  }

  /** Outbound messages of a conversation that the provider accepted, in one of `statuses`, created up to `bound`. */
  async acceptedUpTo(
    trx: Tx,
    accountId: string,
    conversationId: string,
    bound: Date,
    statuses: MessageStatus[],
  ): Promise<string[]> {
    const rows = await trx
      .selectFrom('messages')
      .select('id')
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .where('direction', '=', 'outbound')
      .where('provider_message_id', 'is not', null)
      .where('status', 'in', statuses)
      .where('created_at', '<=', bound)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((r) => r.id);
  }

  async findByProviderId(
    trx: Tx | Db,
    accountId: string,
    providerMessageId: string,
  ): Promise<MessageRow | undefined> {
    return trx
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('provider_message_id', '=', providerMessageId)
      .executeTakeFirst();
  }

  /**
   * The account's messages with these provider ids, locked (FOR UPDATE, in id order) for their
   * status to be moved. Each id is looked up by its unique index on its own, a plan that holds
   * whatever the statistics say.
   */
  async lockByProviderIds(
    trx: Tx,
    accountId: string,
    providerMessageIds: string[],
  ): Promise<MessageRow[]> {
    if (providerMessageIds.length === 0) return [];
    const rows = await sql<MessageRow>`
      WITH wanted AS MATERIALIZED (
        SELECT DISTINCT m.id FROM unnest(${providerMessageIds}::text[]) AS p(provider_message_id)
        CROSS JOIN LATERAL (
          SELECT id FROM messages
          WHERE account_id = ${accountId} AND provider_message_id = p.provider_message_id
          OFFSET 0
        ) m
      )
      SELECT l.* FROM (SELECT id FROM wanted ORDER BY id) w
      CROSS JOIN LATERAL (
        SELECT * FROM messages WHERE account_id = ${accountId} AND id = w.id FOR UPDATE
      ) l`.execute(trx);
    return rows.rows;
  }

  /** New statuses (and failure reasons) of messages the caller holds locked; their rows now. */
  async setStatuses(
    trx: Tx,
    accountId: string,
    changes: { id: string; status: MessageStatus; reason: string | null }[],
    now: Date,
  ): Promise<MessageRow[]> {
    if (changes.length === 0) return [];
    const rows = await sql<MessageRow>`
      UPDATE messages m SET status = c.status, failure_reason = c.reason, updated_at = ${now}
      FROM unnest(${changes.map((c) => c.id)}::text[], ${changes.map((c) => c.status)}::text[],
                  ${changes.map((c) => c.reason)}::text[]) AS c(id, status, reason)
      WHERE m.account_id = ${accountId} AND m.id = c.id
      RETURNING m.*`.execute(trx);
    return rows.rows;
  }

  /** The account's messages with these provider ids, keyed by provider id. */
  async findByProviderIds(
    trx: Tx | Db,
    accountId: string,
    providerMessageIds: string[],
  ): Promise<Map<string, MessageRow>> {
    if (providerMessageIds.length === 0) return new Map();
    const rows = await trx
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('provider_message_id', 'in', providerMessageIds)
      .execute();
    return new Map(rows.map((r) => [r.provider_message_id!, r]));
  }

  async find(
    accountId: string,
    id: string,
    trx: Tx | Db = this.db,
  ): Promise<MessageRow | undefined> {
    return trx
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async listForConversation(accountId: string, conversationId: string): Promise<MessageRow[]> {
    return this.db
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /**
   * Moves an outbound message forward in one conditional UPDATE, so concurrent or late updates
   * cannot move it back; undefined when the update changes nothing.
   */
  async advanceStatus(
    trx: Tx,
    accountId: string,
    id: string,
    to: 'delivered' | 'read' | 'failed',
    reason: string | null,
    now: Date,
  ): Promise<{ row: MessageRow; from: MessageStatus } | undefined> {
    const before = await trx
      .selectFrom('messages')
      .select('status')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!before || !FORWARD_FROM[to].includes(before.status)) return undefined;
    const row = await trx
      .updateTable('messages')
      .set({ status: to, failure_reason: to === 'failed' ? reason : null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('direction', '=', 'outbound')
      .returningAll()
      .executeTakeFirst();
    return row ? { row, from: before.status } : undefined;
  }
}

/**
 * The INSERT of jobs about one message each, for those of `recordOutcomes`' messages that moved
 * on from `queued` (its `changed`): the last part of its statement.
 */
function insertJobsAfter(after: { messageId: string; job: Insertable<JobsTable> }[]) {
  const col = <T>(pick: (j: Insertable<JobsTable>) => T) => after.map((a) => pick(a.job));
  return sql`
    INSERT INTO jobs (account_id, id, kind, payload, run_at, created_at, locked_until, attempts)
    SELECT j.account_id, j.id, j.kind, j.payload, j.run_at, j.created_at, j.locked_until, j.attempts
    FROM unnest(${after.map((a) => a.messageId)}::text[], ${col((j) => j.account_id)}::text[],
                ${col((j) => j.id)}::text[], ${col((j) => j.kind)}::text[],
                ${col((j) => j.payload)}::jsonb[], ${col((j) => j.run_at)}::timestamptz[],
                ${col((j) => j.created_at)}::timestamptz[],
                ${col((j) => j.locked_until ?? null)}::timestamptz[],
                ${col((j) => j.attempts ?? 0)}::int[])
      AS j(message_id, account_id, id, kind, payload, run_at, created_at, locked_until, attempts)
    JOIN changed c ON c.account_id = j.account_id AND c.id = j.message_id
    WHERE c.from_status = 'queued'`;
}
