import { sql } from 'kysely';
import type { Tx } from '../db/database.js';
import type { Clock } from '../clock.js';
import { newId } from '../ids.js';
import type { Author } from '../db/schema.js';
import type { EventPayloads, EventType } from './event-types.js';

/** An event's `data`: the resource, plus `actor` when a request caused the change. */
function eventData(data: unknown, actor: Author | null | undefined): string {
  return JSON.stringify(actor === undefined ? data : { ...(data as object), actor });
}

/**
 * Writes events to the outbox, always inside the transaction of the change they record, and
 * queues one delivery per subscribed active webhook in the same transaction: an event exists,
 * with its deliveries, exactly when its change committed.
 */
export class Outbox {
  constructor(private readonly clock: Clock) {}

  async record<E extends EventType>(
    trx: Tx,
    accountId: string,
    type: E,
    data: EventPayloads[E],
    /** Who caused it through a request (see Scope.actor); absent when the service did. */
    actor?: Author | null,
  ): Promise<string> {
    const id = newId('evt');
    const now = this.clock.now();
    // One statement, one round trip: the event and its deliveries.
    await sql`
      WITH event AS (
        INSERT INTO events (account_id, id, type, data, created_at)
        VALUES (${accountId}, ${id}, ${type}, ${eventData(data, actor)}, ${now})
      )
      INSERT INTO webhook_deliveries (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at, updated_at)
      SELECT account_id, id, ${id}, ${type}, 'pending', ${now}, ${now}, ${now}
      FROM webhooks
      WHERE account_id = ${accountId} AND status = 'active' AND ${type} = ANY(events)`.execute(trx);
    return id;
  }

  /**
   * Several events of one account, in this order, with their deliveries: one statement however
   * many. Returns their ids.
   */
  async recordMany<E extends EventType>(
    trx: Tx,
    accountId: string,
    events: { type: E; data: EventPayloads[E]; actor?: Author | null }[],
  ): Promise<string[]> {
    if (events.length === 0) return [];
    const ids = events.map(() => newId('evt'));
    const now = this.clock.now();
    await sql`
      WITH event AS (
        INSERT INTO events (account_id, id, type, data, created_at)
        SELECT ${accountId}, e.id, e.type, e.data::json, ${now}
        FROM unnest(${ids}::text[], ${events.map((e) => e.type)}::text[],
                    ${events.map((e) => eventData(e.data, e.actor))}::text[]) AS e(id, type, data)
        RETURNING id, type
      )
      INSERT INTO webhook_deliveries (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at, updated_at)
      SELECT w.account_id, w.id, event.id, event.type, 'pending', ${now}, ${now}, ${now}
      FROM event JOIN webhooks w
        ON w.account_id = ${accountId} AND w.status = 'active' AND event.type = ANY(w.events)`.execute(
      trx,
    );
    return ids;
  }
}
