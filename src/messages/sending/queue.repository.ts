import { sql, type Insertable } from 'kysely';
import { batchArray, FIXED_TEXT, type Db, type Tx } from '../../db/database.js';
import type { Author, Channel, JobsTable } from '../../db/schema.js';
import { addressedByPhone } from '../../contacts/identities.js';
import { newId } from '../../ids.js';
import type { MessageRow } from '../messages.repository.js';

/** One message for `QueueRepository.queue`, and the send job that carries it. */
export interface QueueSend {
  /** The message, but for its conversation (found or created by the statement). */
  row: Omit<MessageRow, 'conversation_id'>;
  contactId: string;
  channel: Channel;
  /** The sandbox reaches every contact; a real provider only one with an address on the channel. */
  anyContact: boolean;
  /** Whether it needs the contact's 24-hour window (see window.ts `windowed`). */
  windowed: boolean;
  /** Its own send job; without one, it is carried by the batch's (`queue`'s `batchJob`). */
  job?: Insertable<JobsTable>;
  /**
   * Who sent it through a request, for its `message.created` event's `actor` (see Scope.actor):
   * a user, or null for an API key; absent when the service sends it (a broadcast).
   */
  actor?: Author | null;
}

/** A recipient of `queue` as found: where it is reached, its conversation, what was queued. */
export interface QueuedRecipient {
  accountId: string;
  contactId: string;
  channel: Channel;
  phone: string | null;
  externalId: string | null;
  /** Whether the channel's provider can reach it (the sandbox reaches everyone). */
  reachable: boolean;
  /** Its conversation, when a message of it may be queued there. */
  conversationId: string | null;
  /** The ids of its messages queued (a windowed one outside the window is not). */
  queued: string[];
}

/**
 * The fields of a queued message's `message.created` data, in toMessage's order, of the
 * statement's `send s` and `message m`.
 */
function messageFields(now: Date) {
  return sql`'id', s.id, 'conversation_id', m.conversation_id, 'direction', 'outbound',
             'type', s.type, 'content', s.content, 'media_url', s.media_url, 'status', 'queued',
             'failure_reason', null, 'author', s.author::json,
             'created_at', ${now.toISOString()}::text`;
}

/** Groups up to this size use one prepared plan; a larger batch is planned for its size. */
const PREPARED_MAX = 200;

/** The one statement that queues outbound messages (see `QueueRepository.queue`). */
export class QueueRepository {
  /**
   * Queues messages in one statement, atomic without a transaction (or in the caller's), by the
   * rules of sending, stated here only:
   * - each recipient's contact is locked FOR KEY SHARE (none is merged away or deleted
   *   meanwhile) with its address on the channel; a contact not found is gone, and one the
   *   provider cannot reach (no phone on whatsapp, no identity on the others; the sandbox
   *   reaches everyone) gets nothing;
   * - a message that does not need the 24-hour window (a template where the provider lets it
   *   through, anything on webchat) finds or creates its conversation and reopens it;
   * - one that needs it only goes to an existing conversation whose contact last wrote after
   *   `windowStart`, which it reopens and touches (no conversation is created for it);
   * - each message queued is inserted with its own send job, or all of them in the batch's
   *   (`batchJob`, whose `message_ids` become the messages queued, in order; none written when
   *   none is), and with its `message.created` event (the message as the API presents it, see
   *   `toMessage`, plus the send's `actor` when it has one) and the event's deliveries to the
   *   account's webhooks subscribed to it: the outbox, in the same statement.
   * Rows are locked in one order everywhere (account, channel, contact; contacts first, then
   * conversations); with sends of both kinds, every existing conversation is locked in one
   * sorted pass before any is created, so that two statements never take two rows in opposite
   * orders. Each contact and conversation is looked up by its own key (a LATERAL lookup per
   * recipient, which also takes the locks in the recipients' order): as a join, a batch of
   * hundreds was planned as a scan of the account's whole table, the cost of which grows with
   * the table. Answers every recipient found, with its conversation and its messages queued.
   */
  async queue(
    db: Tx | Db,
    sends: QueueSend[],
    now: Date,
    opts: { windowStart: Date; batchJob?: Insertable<JobsTable> | null },
  ): Promise<QueuedRecipient[]> {
    if (sends.length === 0) return [];
    const targets = new Map<string, { send: QueueSend; windowed: boolean; opens: boolean }>();
    for (const s of sends) {
      const key = [s.row.account_id, s.channel, s.contactId].join('\u0000');
      const target = targets.get(key) ?? { send: s, windowed: false, opens: false };
      target.send = s;
      if (s.windowed) target.windowed = true;
      else target.opens = true;
      targets.set(key, target);
    }
    const t = [...targets.values()];
    const conversationIds = t.map(() => newId('conv'));
    const params = (pick: (r: QueueSend['row']) => unknown) => sends.map((s) => pick(s.row));
    const job = (pick: (j: Insertable<JobsTable>) => unknown) =>
      sends.map((s) => (s.job ? pick(s.job) : null));
    const b = opts.batchJob ?? null;
    const eventIds = sends.map(() => newId('evt'));
    const result = await sql<{
      account_id: string;
      contact_id: string;
      channel: Channel;
      phone: string | null;
      external_id: string | null;
      reachable: boolean;
      conversation_id: string | null;
      queued: string[];
    }>`
      WITH target AS (
        SELECT account_id, contact_id, channel, conversation_id, any_contact, by_phone, windowed,
               opens
        FROM unnest(${batchArray(
          t.map((x) => x.send.row.account_id),
          'text',
        )},
                    ${batchArray(
                      t.map((x) => x.send.contactId),
                      'text',
                    )},
                    ${batchArray(
                      t.map((x) => x.send.channel),
                      'text',
                    )}, ${batchArray(conversationIds, 'text')},
                    ${batchArray(
                      t.map((x) => x.send.anyContact),
                      'boolean',
                    )},
                    ${batchArray(
                      t.map((x) => addressedByPhone(x.send.channel)),
                      'boolean',
                    )},
                    ${batchArray(
                      t.map((x) => x.windowed),
                      'boolean',
                    )}, ${batchArray(
                      t.map((x) => x.opens),
                      'boolean',
                    )})
          AS v(account_id, contact_id, channel, conversation_id, any_contact, by_phone, windowed,
               opens)
      ),
      address AS MATERIALIZED (
        SELECT ct.account_id, ct.id AS contact_id, t.channel, t.conversation_id, t.windowed,
               t.opens, ct.phone, ci.external_id,
               t.any_contact OR CASE WHEN t.by_phone THEN ct.phone ELSE ci.external_id END
                 IS NOT NULL AS reachable
        FROM (SELECT * FROM target ORDER BY account_id, channel COLLATE "C", contact_id) t
        CROSS JOIN LATERAL (
          SELECT ct.account_id, ct.id, ct.phone FROM contacts ct
          WHERE ct.account_id = t.account_id AND ct.id = t.contact_id
          LIMIT 1 FOR KEY SHARE
        ) ct
        LEFT JOIN LATERAL (
          SELECT ci.external_id FROM contact_identities ci
          WHERE ci.account_id = ct.account_id AND ci.contact_id = ct.id AND ci.channel = t.channel
          LIMIT 1
        ) ci ON true
      ),
      existing AS MATERIALIZED (
        SELECT c.account_id, c.id, a.windowed, a.opens,
               coalesce(c.last_inbound_at > ${opts.windowStart}::timestamptz, false) AS in_window
        FROM (
          SELECT * FROM address
          WHERE ${sends.some((s) => s.windowed)} AND reachable
          ORDER BY account_id, channel COLLATE "C", contact_id
        ) a
        CROSS JOIN LATERAL (
          SELECT c.account_id, c.id, c.last_inbound_at FROM conversations c
          WHERE c.account_id = a.account_id AND c.contact_id = a.contact_id AND c.channel = a.channel
          LIMIT 1 FOR UPDATE
        ) c
      ),
      touched AS (
        UPDATE conversations c SET status = 'open', updated_at = ${now}
        FROM existing e
        WHERE c.account_id = e.account_id AND c.id = e.id
          AND e.windowed AND NOT e.opens AND e.in_window
        RETURNING c.account_id, c.id, c.contact_id, c.channel, true AS in_window
      ),
      opened AS (
        INSERT INTO conversations
          (account_id, id, contact_id, channel, status, created_at, updated_at)
        SELECT account_id, conversation_id, contact_id, channel, 'open', ${now}, ${now}
        FROM address WHERE opens AND reachable
        ORDER BY account_id, channel COLLATE "C", contact_id
        ON CONFLICT (account_id, contact_id, channel)
          DO UPDATE SET status = 'open', updated_at = EXCLUDED.updated_at
        RETURNING account_id, id, contact_id, channel,
                  coalesce(last_inbound_at > ${opts.windowStart}::timestamptz, false) AS in_window
      ),
      conversation AS (
        SELECT account_id, id, contact_id, channel, in_window FROM touched
        UNION ALL SELECT account_id, id, contact_id, channel, in_window FROM opened
      ),
      send AS (
        SELECT account_id, id, contact_id, channel, windowed, type, content, media_url,
               template_name, template_language, template_params, broadcast_id, author, job_id, job_kind,
               job_payload, job_run_at, job_locked_until, job_attempts, job_created_at, event_id,
               has_actor, actor, ord
        FROM unnest(${batchArray(
          params((r) => r.account_id),
          'text',
        )}, ${batchArray(
          params((r) => r.id),
          'text',
        )},
                    ${batchArray(
                      sends.map((s) => s.contactId),
                      'text',
                    )}, ${batchArray(
                      sends.map((s) => s.channel),
                      'text',
                    )},
                    ${batchArray(
                      sends.map((s) => s.windowed),
                      'boolean',
                    )},
                    ${batchArray(
                      params((r) => r.type),
                      'text',
                    )}, ${batchArray(
                      params((r) => r.content),
                      'text',
                    )},
                    ${batchArray(
                      params((r) => r.media_url),
                      'text',
                    )}, ${batchArray(
                      params((r) => r.template_name),
                      'text',
                    )},
                    ${batchArray(
                      params((r) => r.template_language),
                      'text',
                    )},
                    ${batchArray(
                      params((r) =>
                        r.template_params === null ? null : JSON.stringify(r.template_params),
                      ),
                      'jsonb',
                    )},
                    ${batchArray(
                      params((r) => r.broadcast_id),
                      'text',
                    )},
                    ${batchArray(
                      params((r) => (r.author === null ? null : JSON.stringify(r.author))),
                      'text',
                    )},
                    ${batchArray(
                      job((j) => j.id),
                      'text',
                    )}, ${batchArray(
                      job((j) => j.kind),
                      'text',
                    )},
                    ${batchArray(
                      job((j) => j.payload),
                      'jsonb',
                    )}, ${batchArray(
                      job((j) => j.run_at),
                      'timestamptz',
                    )},
                    ${batchArray(
                      job((j) => j.locked_until ?? null),
                      'timestamptz',
                    )},
                    ${batchArray(
                      job((j) => j.attempts ?? 0),
                      'int',
                    )},
                    ${batchArray(
                      job((j) => j.created_at),
                      'timestamptz',
                    )},
                    ${batchArray(eventIds, 'text')},
                    ${batchArray(
                      sends.map((s) => s.actor !== undefined),
                      'boolean',
                    )},
                    ${batchArray(
                      sends.map((s) => (s.actor ? JSON.stringify(s.actor) : null)),
                      'text',
                    )})
          WITH ORDINALITY
          AS v(account_id, id, contact_id, channel, windowed, type, content, media_url,
               template_name, template_language, template_params, broadcast_id, author, job_id, job_kind,
               job_payload, job_run_at, job_locked_until, job_attempts, job_created_at, event_id,
               has_actor, actor, ord)
      ),
      message AS (
        INSERT INTO messages
          (account_id, id, conversation_id, direction, type, content, media_url, template_name,
           template_language, template_params, status, broadcast_id, author, created_at,
           updated_at)
        SELECT s.account_id, s.id, c.id, 'outbound', s.type, s.content, s.media_url,
               s.template_name, s.template_language, s.template_params, 'queued',
               s.broadcast_id, s.author::jsonb, ${now}, ${now}
        FROM send s
        JOIN conversation c
          ON c.account_id = s.account_id AND c.contact_id = s.contact_id AND c.channel = s.channel
        WHERE NOT s.windowed OR c.in_window
        RETURNING account_id, id, conversation_id
      ),
      job AS (
        INSERT INTO jobs (account_id, id, kind, payload, run_at, created_at, locked_until, attempts)
        SELECT s.account_id, s.job_id, s.job_kind, s.job_payload, s.job_run_at, s.job_created_at,
               s.job_locked_until, s.job_attempts
        FROM send s JOIN message m ON m.account_id = s.account_id AND m.id = s.id
        WHERE s.job_id IS NOT NULL
      ),
      batch_job AS (
        INSERT INTO jobs (account_id, id, kind, payload, run_at, created_at, locked_until, attempts)
        SELECT ${b?.account_id ?? null}::text, ${b?.id ?? null}::text, ${b?.kind ?? null}::text,
               ${b?.payload ?? null}::jsonb
                 || jsonb_build_object('message_ids', jsonb_agg(s.id ORDER BY s.ord)),
               ${b?.run_at ?? null}::timestamptz, ${b?.created_at ?? null}::timestamptz,
               ${b?.locked_until ?? null}::timestamptz, ${b?.attempts ?? 0}::int
        FROM send s JOIN message m ON m.account_id = s.account_id AND m.id = s.id
        WHERE ${b !== null}
        HAVING count(*) > 0
      ),
      event AS (
        INSERT INTO events (account_id, id, type, data, created_at)
        SELECT s.account_id, s.event_id, 'message.created',
               -- The Message as toMessage presents it (json keeps this key order), created_at
               -- as JS's toISOString writes it; then the actor, when a request sent it.
               CASE WHEN s.has_actor
                 THEN json_build_object(${messageFields(now)}, 'actor', s.actor::json)
                 ELSE json_build_object(${messageFields(now)})
               END,
               ${now}
        FROM send s JOIN message m ON m.account_id = s.account_id AND m.id = s.id
        ORDER BY s.ord
        RETURNING account_id, id
      ),
      hook AS (
        SELECT w.account_id, w.id
        FROM (SELECT DISTINCT account_id FROM event) a
        CROSS JOIN LATERAL (
          SELECT w.account_id, w.id FROM webhooks w
          WHERE w.account_id = a.account_id AND w.status = 'active'
            AND 'message.created' = ANY(w.events)
        ) w
      ),
      delivery AS (
        INSERT INTO webhook_deliveries
          (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at,
           updated_at)
        SELECT h.account_id, h.id, e.id, 'message.created', 'pending', ${now}, ${now}, ${now}
        FROM event e JOIN hook h ON h.account_id = e.account_id
      ),
      queued AS (
        SELECT account_id, conversation_id, array_agg(id) AS ids
        FROM message GROUP BY account_id, conversation_id
      )
      SELECT a.account_id, a.contact_id, a.channel, a.phone, a.external_id, a.reachable,
             c.id AS conversation_id, coalesce(q.ids, '{}') AS queued
      FROM address a
      LEFT JOIN conversation c
        ON c.account_id = a.account_id AND c.contact_id = a.contact_id AND c.channel = a.channel
      LEFT JOIN queued q ON q.account_id = c.account_id AND q.conversation_id = c.id
      ${sends.length <= PREPARED_MAX ? FIXED_TEXT : sql``}`.execute(db);
    return result.rows.map((r) => ({
      accountId: r.account_id,
      contactId: r.contact_id,
      channel: r.channel,
      phone: r.phone,
      externalId: r.external_id,
      reachable: r.reachable,
      conversationId: r.conversation_id,
      queued: r.queued,
    }));
  }
}
