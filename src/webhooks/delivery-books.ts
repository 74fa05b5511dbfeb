import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/database.js';
import { Batcher } from '../db/batcher.js';
import { newId } from '../ids.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Claimed, Outcome } from './delivery-attempt.js';
import { nextRetryDelayMs } from './retry-policy.js';
import { lockDeliveries } from './webhooks.repository.js';

const DAY_MS = 86_400_000;
/** A webhook every attempt to which has failed for this long is disabled (as Svix does). */
export const DISABLE_AFTER_FAILING_MS = 5 * DAY_MS;

/** A finished attempt, as its bookkeeping writes it. */
interface Attempt {
  d: Claimed;
  id: string;
  state: 'delivered' | 'pending' | 'failed';
  nextAttemptAt: Date;
  statusCode: number | null;
  error: string | null;
  excerpt: string | null;
  durationMs: number;
  at: Date;
}

/**
 * What an attempt's outcome changes: the delivery's next state and retry time, its attempt log
 * row, the webhook's run of failures, and the webhook disabled when the receiver is gone or has
 * failed for DISABLE_AFTER_FAILING_MS.
 */
export class DeliveryBooks {
  /**
   * Group commit of outcomes: one statement for the attempts that finish while one is written.
   * Should a group fail, its attempts are written one by one, so that one bad row (or a lost
   * deadlock) does not leave the others leased and sent again.
   */
  private readonly groups = new Batcher<Attempt, void>(async (attempts) => {
    try {
      await this.writeAttempts(this.opts.db, attempts);
    } catch (err) {
      if (attempts.length === 1) throw err;
      for (const attempt of attempts) {
        await this.writeAttempts(this.opts.db, [attempt]).catch((e: unknown) =>
          this.opts.log.error(
            { err: e, webhook: attempt.d.webhook_id },
            'webhook delivery bookkeeping failed',
          ),
        );
      }
    }
    await this.trackHealth(attempts).catch((err: unknown) =>
      this.opts.log.error({ err }, 'webhook health bookkeeping failed'),
    );
    return [];
  });

  constructor(
    private readonly opts: {
      db: Db;
      clock: Clock;
      log: FastifyBaseLogger;
      random: () => number;
      metrics?: Metrics;
    },
  ) {}

  /** Records an attempt's outcome (grouped with others finishing meanwhile). */
  async record(d: Claimed, outcome: Outcome, durationMs: number): Promise<void> {
    const now = this.opts.clock.now();
    let state: Attempt['state'] = 'delivered';
    let nextAttemptAt = now;
    if (outcome.kind === 'failed') {
      const delay = outcome.gone
        ? undefined
        : nextRetryDelayMs(d.attempts, outcome.retryAfterMs, this.opts.random);
      state = delay === undefined ? 'failed' : 'pending';
      if (delay !== undefined) nextAttemptAt = new Date(now.getTime() + delay);
    }
    this.opts.metrics?.webhookAttempt(
      outcome.kind === 'delivered' ? 'success' : state === 'failed' ? 'gave_up' : 'failure',
      outcome.statusCode,
      durationMs / 1000,
    );
    const attempt: Attempt = {
      d,
      id: newId('dlv'),
      state,
      nextAttemptAt,
      statusCode: outcome.statusCode,
      error: outcome.kind === 'failed' ? outcome.error.slice(0, 500) : null,
      excerpt: outcome.excerpt,
      durationMs,
      at: now,
    };
    if (outcome.kind === 'failed') {
      this.opts.log.info(
        {
          webhook: d.webhook_id,
          event: d.event_id,
          attempt: d.attempts,
          status: outcome.statusCode,
          error: outcome.error,
        },
        'webhook delivery failed',
      );
    }
    if (outcome.kind === 'failed' && outcome.gone) {
      // 410 Gone: the receiver says this endpoint is no more.
      await this.disable(d.account_id, d.webhook_id, 'the receiver answered 410 Gone', now, [
        attempt,
      ]);
      return;
    }
    await this.groups.submit(attempt);
  }

  /**
   * Disables a webhook and gives up what is queued for it, with the attempt that decided it when
   * there is one, in one transaction.
   */
  private async disable(
    accountId: string,
    webhookId: string,
    reason: string,
    now: Date,
    attempts: Attempt[] = [],
  ): Promise<void> {
    await this.opts.db.transaction().execute(async (trx) => {
      if (attempts.length > 0) await this.writeAttempts(trx, attempts);
      await trx
        .updateTable('webhooks')
        .set({ status: 'disabled', disabled_reason: reason, updated_at: now })
        .where('account_id', '=', accountId)
        .where('id', '=', webhookId)
        .execute();
      await lockDeliveries(trx, accountId, webhookId);
      await trx
        .updateTable('webhook_deliveries')
        .set({ state: 'failed', locked_until: null, updated_at: now })
        .where('account_id', '=', accountId)
        .where('webhook_id', '=', webhookId)
        .where('state', '=', 'pending')
        .execute();
    });
  }

  /**
   * Keeps each webhook's failing_since (the start of its unbroken run of failed attempts; null
   * after any success), and disables a webhook whose attempts have all failed for
   * DISABLE_AFTER_FAILING_MS. One statement per group of attempts, apart from the attempts'
   * own: it writes a webhook row only when its run starts or ends, so a busy webhook's row is not
   * rewritten at every delivery, and it never holds delivery locks while it waits on a webhook.
   */
  private async trackHealth(attempts: readonly Attempt[]): Promise<void> {
    if (attempts.length === 0) return;
    const now = this.opts.clock.now();
    const cutoff = new Date(now.getTime() - DISABLE_AFTER_FAILING_MS);
    const failing = await sql<{ account_id: string; id: string; failing_since: Date }>`
      WITH outcome AS (
        SELECT account_id, webhook_id, bool_or(ok) AS ok, min(at) AS first_failure
        FROM unnest(${attempts.map((a) => a.d.account_id)}::text[], ${attempts.map((a) => a.d.webhook_id)}::text[],
                    ${attempts.map((a) => a.state === 'delivered')}::boolean[], ${attempts.map((a) => a.at)}::timestamptz[])
          AS i(account_id, webhook_id, ok, at)
        GROUP BY account_id, webhook_id
      ),
      changed AS (
        UPDATE webhooks w
        SET failing_since = CASE WHEN o.ok THEN NULL ELSE o.first_failure END
        FROM outcome o
        WHERE w.account_id = o.account_id AND w.id = o.webhook_id
          AND ((o.ok AND w.failing_since IS NOT NULL) OR (NOT o.ok AND w.failing_since IS NULL))
        RETURNING w.id
      )
      SELECT w.account_id, w.id, w.failing_since FROM webhooks w JOIN outcome o
        ON w.account_id = o.account_id AND w.id = o.webhook_id
      WHERE NOT o.ok AND w.status = 'active' AND w.failing_since <= ${cutoff}`.execute(
      this.opts.db,
    );
    for (const w of failing.rows) {
      this.opts.log.warn(
        { webhook: w.id, failingSince: w.failing_since },
        'webhook disabled: every delivery has failed for 5 days',
      );
      await this.disable(
        w.account_id,
        w.id,
        `every delivery has failed since ${new Date(w.failing_since).toISOString()}`,
        now,
      );
    }
  }

  /**
   * One statement for any number of finished attempts: each delivery's new state and its attempt
   * log row commit together, and nothing is logged for a delivery deleted meanwhile (its webhook
   * is gone).
   */
  private async writeAttempts(db: Db | Tx, attempts: readonly Attempt[]): Promise<void> {
    const col = <T>(f: (a: Attempt) => T): T[] => attempts.map(f);
    await sql`
      WITH input AS (
        SELECT * FROM unnest(
          ${col((a) => a.d.account_id)}::text[], ${col((a) => a.d.webhook_id)}::text[], ${col((a) => a.d.event_id)}::text[],
          ${col((a) => a.id)}::text[], ${col((a) => a.d.type)}::text[], ${col((a) => a.d.attempts)}::int[],
          ${col((a) => a.state)}::text[], ${col((a) => a.nextAttemptAt)}::timestamptz[], ${col((a) => a.statusCode)}::int[],
          ${col((a) => a.error)}::text[], ${col((a) => a.durationMs)}::int[], ${col((a) => a.at)}::timestamptz[],
          ${col((a) => a.excerpt)}::text[]
        ) AS i(account_id, webhook_id, event_id, id, event_type, attempt, state, next_attempt_at, status_code, error, duration_ms, at, excerpt)
      ),
      -- Locked in primary-key order, the order of every multi-row lock on deliveries
      -- (lockDeliveries), so a group never deadlocks with a webhook's deletion.
      locked AS (
        SELECT d.ctid AS row_id, i.* FROM input i
        JOIN webhook_deliveries d ON d.account_id = i.account_id AND d.webhook_id = i.webhook_id AND d.event_id = i.event_id
        ORDER BY d.account_id, d.webhook_id, d.event_id
        FOR UPDATE OF d
      ),
      updated AS (
        UPDATE webhook_deliveries d
        -- A retry is given up when the webhook was disabled meanwhile (by another attempt of
        -- this round, a 410 or a PATCH): it would never be sent, or be sent on re-enabling.
        SET state = CASE WHEN l.state = 'pending' AND NOT EXISTS (
                      SELECT 1 FROM webhooks w
                      WHERE w.account_id = d.account_id AND w.id = d.webhook_id AND w.status = 'active')
                    THEN 'failed' ELSE l.state END,
            next_attempt_at = l.next_attempt_at, locked_until = NULL, updated_at = l.at
        FROM locked l
        WHERE d.ctid = l.row_id
        RETURNING d.account_id, d.webhook_id, d.event_id, d.state
      )
      -- The log's next_attempt_at: the retry this attempt scheduled, if it still stands.
      INSERT INTO webhook_attempts (account_id, id, webhook_id, event_id, event_type, attempt, status_code, error, duration_ms, created_at, response_excerpt, next_attempt_at)
      SELECT i.account_id, i.id, i.webhook_id, i.event_id, i.event_type, i.attempt, i.status_code, i.error, i.duration_ms, i.at,
             i.excerpt, CASE WHEN u.state = 'pending' THEN i.next_attempt_at END
      FROM input i JOIN updated u USING (account_id, webhook_id, event_id)`.execute(db);
  }
}
