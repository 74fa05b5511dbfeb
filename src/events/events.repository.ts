import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/** A place in an account's stream of events: after every event at or before it. */
export interface StreamPosition {
  /** The writing transaction's id (xid8, as text). */
  xid: string;
  /** The event's `seq` (bigint, as text). */
  seq: string;
}

export interface StreamedEvent {
  id: string;
  type: string;
  created_at: Date;
  data: unknown;
  position: StreamPosition;
}

export interface StreamBatch {
  events: StreamedEvent[];
  /**
   * Committed events exist past the batch that may not be read yet, because a transaction that
   * began before them is still running (see readAfter): read again soon, even without a wake-up.
   */
  held: boolean;
}

/** The events table as the live stream reads it (the outbox writes it). */
export class EventsRepository {
  constructor(private readonly db: Db) {}

  /** Where the stream stands after the account's event `id`, or null if the account has none such. */
  async position(accountId: string, id: string): Promise<StreamPosition | null> {
    const row = await this.db
      .selectFrom('events')
      .select([sql<string>`xid::text`.as('xid'), 'seq'])
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row ?? null;
  }

  /**
   * Where a stream that starts now stands: before every event whose transaction may still be
   * running, after every one already settled (an event committed an instant before may follow).
   */
  async now(): Promise<StreamPosition> {
    const { rows } = await sql<{
      xid: string;
    }>`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xid`.execute(this.db);
    return { xid: rows[0]!.xid, seq: '0' };
  }

  /**
   * The account's next events after `after`, in (transaction id, seq) order, and only those
   * written by transactions older than the oldest one still running.
   *
   * Why not simply `seq > last`: identity values are taken at insert, not at commit, so a
   * transaction holding seq 5 can commit after one holding seq 6 has been read, and a reader
   * whose cursor moved past 6 would never see 5. Rows whose transaction id is below the
   * snapshot's xmin are final (every such transaction has ended, and every one that has not yet
   * committed has a higher id), so reading only those, in transaction id order, means the
   * cursor only ever passes a settled prefix: nothing is skipped and nothing read twice. The
   * price is that an event waits while an older transaction of any account is still running;
   * transactions here are short (the network is never inside one).
   */
  async readAfter(accountId: string, after: StreamPosition, limit: number): Promise<StreamBatch> {
    const { rows } = await sql<{
      held: boolean;
      events: {
        id: string;
        type: string;
        xid: string;
        seq: number | string;
        created_at: string;
        data: unknown;
      }[];
    }>`
      WITH h AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS x)
      SELECT
        EXISTS (SELECT 1 FROM events l WHERE l.account_id = ${accountId} AND l.xid >= h.x) AS held,
        COALESCE((
          SELECT json_agg(b ORDER BY b.xid, b.seq) FROM (
            SELECT e.id, e.type, e.xid, e.seq, e.created_at, e.data
            FROM events e
            WHERE e.account_id = ${accountId}
              AND (e.xid, e.seq) > (${after.xid}::xid8, ${after.seq}::bigint)
              AND e.xid < h.x
            ORDER BY e.xid, e.seq
            LIMIT ${limit}) b
        ), '[]'::json) AS events
      FROM h`.execute(this.db);
    const row = rows[0]!;
    return {
      held: row.held,
      events: row.events.map((e) => ({
        id: e.id,
        type: e.type,
        created_at: new Date(e.created_at),
        data: e.data,
        position: { xid: String(e.xid), seq: String(e.seq) },
      })),
    };
  }
}
