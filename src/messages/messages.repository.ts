import { sql, type Insertable, type Selectable } from 'kysely';
import { batchArray, type Db, type Tx } from '../db/database.js';
import type { Channel, JobsTable, MessageStatus, MessagesTable } from '../db/schema.js';
import { addressOn } from '../contacts/identities.js';
import { deleteHeldJobs, type HeldJob } from '../jobs/job-queue.js';

export type MessageRow = Selectable<MessagesTable>;

/** A provider's answer to one queued message, to record. */
export type OutboundRecord =
  | { id: string; status: 'sent'; providerMessageId: string }
  | { id: string; status: 'failed'; reason: string };

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
    author: row.author === null ? null : JSON.stringify(row.author),
  };
}

export class MessagesRepository {
  constructor(private readonly db: Db) {}

  async insertMany(trx: Tx, rows: MessageRow[]): Promise<void> {
    if (rows.length > 0) await trx.insertInto('messages').values(rows.map(forInsert)).execute();
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
    // Each message is locked and read by its whole key (account, id) in a LATERAL lookup, in
    // id order (two statements never lock the same messages in opposite orders), and the update
    // joins on the whole key too; the batch's length is hidden from the planner (`batchArray`),
    // so that neither becomes a scan of the account's messages for every batch.
    const byId = [...records].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const column = <T>(pick: (r: OutboundRecord) => T) => byId.map(pick);
    const update = sql`
      UPDATE messages m SET
        status = CASE WHEN old.from_status = 'queued' THEN old.status ELSE m.status END,
        failure_reason = CASE WHEN old.from_status = 'queued' THEN old.failure_reason ELSE m.failure_reason END,
        provider_message_id = COALESCE(m.provider_message_id, old.provider_message_id),
        updated_at = ${now}
      FROM old
      WHERE m.account_id = old.account_id AND m.id = old.id
        AND (old.from_status = 'queued' OR (m.provider_message_id IS NULL AND old.provider_message_id IS NOT NULL))
      RETURNING m.*, old.from_status`;
    const result = await sql<MessageRow & { from_status: MessageStatus }>`
      WITH old AS MATERIALIZED (
        SELECT v.account_id, v.id, v.status, v.provider_message_id, v.failure_reason,
               cur.status AS from_status
        FROM unnest(${batchArray(
          column(() => accountId),
          'text',
        )},
                    ${batchArray(
                      column((r) => r.id),
                      'text',
                    )},
                    ${batchArray(
                      column((r) => r.status),
                      'text',
                    )},
                    ${batchArray(
                      column((r) => (r.status === 'sent' ? r.providerMessageId : null)),
                      'text',
                    )},
                    ${batchArray(
                      column((r) => (r.status === 'failed' ? r.reason.slice(0, 2000) : null)),
                      'text',
                    )})
          AS v(account_id, id, status, provider_message_id, failure_reason)
        CROSS JOIN LATERAL (
          SELECT m.status FROM messages m
          WHERE m.account_id = v.account_id AND m.id = v.id
          LIMIT 1 FOR UPDATE
        ) cur
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

  /**
   * A page of a conversation's history, newest first: up to `limit` messages older than
   * `before` (its time and id; the newest when null), and whether older ones remain. One walk of
   * the conversation index, however long the history.
   */
  async historyPage(
    accountId: string,
    conversationId: string,
    before: { created_at: Date; id: string } | null,
    limit: number,
  ): Promise<{ rows: MessageRow[]; hasMore: boolean }> {
    let q = this.db
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId);
    if (before)
      q = q.where((eb) =>
        eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(before.created_at, before.id)),
      );
    const rows = await q
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit + 1)
      .execute();
    return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
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
