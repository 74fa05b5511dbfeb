import https from 'node:https';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/database.js';
import { Batcher } from '../db/batcher.js';
import { newId } from '../ids.js';
import { guardedFetch, OutboundError } from '../net/guarded-fetch.js';
import { EVENT_RETENTION_MS, pruneEvents } from '../events/retention.js';
import { deleteInBatches } from '../db/retention.js';
import type { Metrics } from '../metrics/metrics.js';
import { PollLoop } from '../jobs/poll-loop.js';
import { nextRetryDelayMs, parseRetryAfter } from './retry-policy.js';
import { lockDeliveries } from './webhooks.repository.js';
import { eventBody, serviceSignature, standardSignature } from './signing.js';

export const DELIVERY_TIMEOUT_MS = 10_000;
const DAY_MS = 86_400_000;
/** Rows deleted per statement when pruning deliveries and attempts. */
const PRUNE_BATCH = 5_000;
/** A webhook every attempt to which has failed for this long is disabled (as Svix does). */
export const DISABLE_AFTER_FAILING_MS = 5 * DAY_MS;

export interface DispatcherOptions {
  db: Db;
  clock: Clock;
  log: FastifyBaseLogger;
  allowPrivate: boolean;
  /** Deliveries in flight in this process, across all webhooks. */
  maxInFlight?: number;
  /** Deliveries in flight in this process for one webhook: a slow receiver holds at most this many slots. */
  perWebhook?: number;
  /** A claim's lease; a worker killed mid-delivery frees its deliveries when it ends. */
  leaseMs?: number;
  pollIntervalMs?: number;
  /** Finished deliveries, attempt logs and events older than this are pruned (7 days). */
  retentionMs?: number;
  random?: () => number;
  /** Only this account's deliveries (tests and tools); every account's by default. */
  accountId?: string;
  /** Counts attempts by outcome and times them (the API process's registry serves them). */
  metrics?: Metrics;
}

interface Claimed {
  account_id: string;
  webhook_id: string;
  event_id: string;
  attempts: number;
  url: string;
  secret: string;
  type: string;
  data: unknown;
  created_at: Date;
}

/** A finished attempt, as its bookkeeping writes it. */
interface Attempt {
  d: Claimed;
  id: string;
  state: 'delivered' | 'pending' | 'failed';
  nextAttemptAt: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  at: Date;
}

type Outcome =
  | { kind: 'delivered'; statusCode: number }
  | {
      kind: 'failed';
      statusCode: number | null;
      error: string;
      retryAfterMs?: number;
      gone?: boolean;
    };

/**
 * Delivers queued webhook events: at least once, signed over the exact bytes sent, with the
 * retry schedule, and with bounded concurrency per webhook so that one slow receiver never
 * holds up the others. Any number of dispatchers can share the database.
 */
export class WebhookDispatcher {
  private readonly maxInFlight: number;
  private readonly perWebhook: number;
  private readonly leaseMs: number;
  private readonly pollIntervalMs: number;
  private readonly retentionMs: number;
  private readonly random: () => number;
  private readonly agent = new https.Agent({
    keepAlive: true,
    maxSockets: 64,
    maxFreeSockets: 64,
    timeout: 30_000,
  });
  private readonly inFlight = new Map<string, number>();
  private readonly pending = new Set<Promise<void>>();
  private readonly loop: PollLoop;
  private lastPruneAt = 0;
  /**
   * The last claim may have left due deliveries behind for want of a slot. Only then does a freed
   * slot trigger the next claim at once; otherwise new work waits for the poll interval, so a
   * steady trickle of events is claimed in groups rather than with one claim per delivery.
   */
  private backlogged = false;
  /** Claim statements run so far (tests watch that an idle or saturated dispatcher does not spin). */
  claims = 0;
  /**
   * Group commit of outcomes: one statement for the attempts that finish while one is written.
   * Should a group fail, its attempts are written one by one, so that one bad row (or a lost
   * deadlock) does not leave the others leased and sent again.
   */
  private readonly books = new Batcher<Attempt, void>(async (attempts) => {
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

  constructor(private readonly opts: DispatcherOptions) {
    this.maxInFlight = opts.maxInFlight ?? 256;
    this.perWebhook = opts.perWebhook ?? 32;
    this.leaseMs = opts.leaseMs ?? DELIVERY_TIMEOUT_MS + 20_000;
    this.pollIntervalMs = opts.pollIntervalMs ?? 50;
    this.retentionMs = opts.retentionMs ?? EVENT_RETENTION_MS;
    this.random = opts.random ?? Math.random;
    this.loop = new PollLoop(
      async () => {
        await this.pruneIfDue();
        // At once again only when this claim took work and left some behind; a claim that took
        // nothing (every due webhook at its limit) waits for a slot's signal or the interval.
        const claimed = await this.claimAndStart();
        return claimed > 0 && this.backlogged && this.inFlightTotal < this.maxInFlight;
      },
      this.pollIntervalMs,
      (err, consecutive) =>
        this.opts.log.error(
          { err, consecutive },
          'webhook dispatcher: claiming failed; retrying with back-off',
        ),
    );
  }

  start(): void {
    this.loop.start();
  }

  /** Stops claiming and waits for deliveries in flight. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.pending);
    this.agent.destroy();
  }

  /** Delivers everything due now and waits for it (tests and tools). Returns how many attempts ran. */
  async drain(maxRounds = 1000): Promise<number> {
    let total = 0;
    for (let i = 0; i < maxRounds; i++) {
      const n = await this.claimAndStart();
      total += n;
      await Promise.all(this.pending);
      if (n === 0) break;
    }
    return total;
  }

  private get inFlightTotal(): number {
    return this.pending.size;
  }

  private async claimAndStart(): Promise<number> {
    const free = this.maxInFlight - this.inFlightTotal;
    if (free <= 0) {
      this.backlogged = true;
      return 0;
    }
    const busy = [...this.inFlight.entries()];
    const now = this.opts.clock.now();
    const lease = new Date(now.getTime() + this.leaseMs);
    this.claims++;
    const result = await sql<Claimed>`
      WITH RECURSIVE hooks AS (
        (SELECT webhook_id FROM webhook_deliveries WHERE state = 'pending' ORDER BY webhook_id LIMIT 1)
        UNION ALL
        SELECT (SELECT d.webhook_id FROM webhook_deliveries d
                WHERE d.state = 'pending' AND d.webhook_id > hooks.webhook_id
                ORDER BY d.webhook_id LIMIT 1)
        FROM hooks WHERE hooks.webhook_id IS NOT NULL
      ),
      busy AS (
        SELECT * FROM unnest(${busy.map((b) => b[0])}::text[], ${busy.map((b) => Math.max(0, this.perWebhook - b[1]))}::int[]) AS b(webhook_id, slots)
      ),
      due AS (
        SELECT x.ctid
        FROM hooks
        CROSS JOIN LATERAL (
          SELECT d.ctid FROM webhook_deliveries d
          WHERE d.webhook_id = hooks.webhook_id AND d.state = 'pending' AND d.next_attempt_at <= ${now}
            AND (${this.opts.accountId ?? null}::text IS NULL OR d.account_id = ${this.opts.accountId ?? null})
            AND EXISTS (SELECT 1 FROM webhooks w WHERE w.account_id = d.account_id AND w.id = d.webhook_id AND w.status = 'active')
            AND (d.locked_until IS NULL OR d.locked_until < ${now})
          ORDER BY d.next_attempt_at
          LIMIT COALESCE((SELECT slots FROM busy WHERE busy.webhook_id = hooks.webhook_id), ${this.perWebhook})
          FOR UPDATE SKIP LOCKED
        ) x
        WHERE hooks.webhook_id IS NOT NULL
        LIMIT ${free}
      ),
      -- Only unindexed columns change here, so claims are HOT updates that leave no dead index
      -- entries for the next claim's scan to wade through. The rows are found again by their
      -- ctid (locked above, so it cannot move): a plan that cannot go wrong on stale statistics,
      -- as a join on the key could just after a large batch of events was queued.
      claimed AS (
        UPDATE webhook_deliveries d
        SET locked_until = ${lease}, attempts = d.attempts + 1
        FROM due
        WHERE d.ctid = due.ctid
        RETURNING d.account_id, d.webhook_id, d.event_id, d.attempts
      )
      SELECT c.account_id, c.webhook_id, c.event_id, c.attempts, w.url, w.secret, e.type, e.data, e.created_at
      FROM claimed c
      JOIN webhooks w ON w.account_id = c.account_id AND w.id = c.webhook_id
      JOIN events e ON e.account_id = c.account_id AND e.id = c.event_id`.execute(this.opts.db);

    for (const claimed of result.rows) {
      this.inFlight.set(claimed.webhook_id, (this.inFlight.get(claimed.webhook_id) ?? 0) + 1);
      // The webhook's slot frees as soon as its receiver has answered; the delivery stays leased
      // (and counted in `pending`) until its outcome is recorded.
      let slotHeld = true;
      const releaseSlot = () => {
        if (!slotHeld) return;
        slotHeld = false;
        const left = (this.inFlight.get(claimed.webhook_id) ?? 1) - 1;
        if (left <= 0) this.inFlight.delete(claimed.webhook_id);
        else this.inFlight.set(claimed.webhook_id, left);
        if (this.backlogged) this.loop.signal();
      };
      const task = this.deliver(claimed, releaseSlot)
        .catch((err: unknown) =>
          this.opts.log.error(
            { err, webhook: claimed.webhook_id },
            'webhook delivery bookkeeping failed',
          ),
        )
        .finally(() => {
          releaseSlot();
          this.pending.delete(task);
          if (this.backlogged) this.loop.signal();
        });
      this.pending.add(task);
    }
    // Left behind: the claim took all it was offered, overall or for some webhook (counted
    // against the slots offered, since deliveries that finish meanwhile free slots too).
    const taken = new Map<string, number>();
    for (const row of result.rows) taken.set(row.webhook_id, (taken.get(row.webhook_id) ?? 0) + 1);
    const offered = new Map(busy.map(([id, n]) => [id, Math.max(0, this.perWebhook - n)]));
    this.backlogged =
      result.rows.length >= free ||
      [...offered.values()].some((slots) => slots === 0) ||
      [...taken].some(([id, n]) => n >= (offered.get(id) ?? this.perWebhook));
    return result.rows.length;
  }

  private async deliver(d: Claimed, answered: () => void): Promise<void> {
    const body = eventBody({
      id: d.event_id,
      type: d.type,
      created_at: new Date(d.created_at),
      data: d.data,
    });
    const started = this.opts.clock.now();
    const timestamp = Math.floor(started.getTime() / 1000);
    const t0 = performance.now();
    let outcome: Outcome;
    try {
      const res = await guardedFetch({
        url: d.url,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'Switchboard-Webhooks/1.0',
          'x-service-signature': serviceSignature(d.secret, body),
          'x-service-event-id': d.event_id,
          'x-service-delivery-attempt': String(d.attempts),
          'webhook-id': d.event_id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': standardSignature(d.secret, d.event_id, timestamp, body),
        },
        body,
        timeoutMs: DELIVERY_TIMEOUT_MS,
        maxBytes: 0,
        discardBody: true,
        maxRedirects: 0,
        allowPrivate: this.opts.allowPrivate,
        agent: this.agent,
      });
      if (res.status >= 200 && res.status < 300)
        outcome = { kind: 'delivered', statusCode: res.status };
      else
        outcome = {
          kind: 'failed',
          statusCode: res.status,
          error:
            res.status >= 300 && res.status < 400
              ? `redirect (${res.status}) not followed`
              : `HTTP ${res.status}`,
          retryAfterMs: parseRetryAfter(res.headers['retry-after'], started),
          gone: res.status === 410,
        };
    } catch (err) {
      outcome = {
        kind: 'failed',
        statusCode: null,
        error: err instanceof OutboundError ? err.message : 'network error',
      };
    }
    answered();
    await this.record(d, outcome, Math.round(performance.now() - t0));
  }

  private async record(d: Claimed, outcome: Outcome, durationMs: number): Promise<void> {
    const now = this.opts.clock.now();
    let state: Attempt['state'] = 'delivered';
    let nextAttemptAt = now;
    if (outcome.kind === 'failed') {
      const delay = outcome.gone
        ? undefined
        : nextRetryDelayMs(d.attempts, outcome.retryAfterMs, this.random);
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
    await this.books.submit(attempt);
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
          ${col((a) => a.error)}::text[], ${col((a) => a.durationMs)}::int[], ${col((a) => a.at)}::timestamptz[]
        ) AS i(account_id, webhook_id, event_id, id, event_type, attempt, state, next_attempt_at, status_code, error, duration_ms, at)
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
        RETURNING d.account_id, d.webhook_id, d.event_id
      )
      INSERT INTO webhook_attempts (account_id, id, webhook_id, event_id, event_type, attempt, status_code, error, duration_ms, created_at)
      SELECT i.account_id, i.id, i.webhook_id, i.event_id, i.event_type, i.attempt, i.status_code, i.error, i.duration_ms, i.at
      FROM input i JOIN updated u USING (account_id, webhook_id, event_id)`.execute(db);
  }

  private async pruneIfDue(): Promise<void> {
    const now = this.opts.clock.now().getTime();
    if (now - this.lastPruneAt < 600_000) return;
    this.lastPruneAt = now;
    const before = new Date(now - this.retentionMs);
    // A batch at a time, as events are: a busy week is millions of rows.
    await deleteInBatches(
      this.opts.db,
      'webhook_deliveries',
      (limit) => sql`
        SELECT ctid FROM webhook_deliveries
        WHERE state <> 'pending' AND updated_at < ${before} LIMIT ${limit}`,
      PRUNE_BATCH,
    );
    await deleteInBatches(
      this.opts.db,
      'webhook_attempts',
      (limit) => sql`SELECT ctid FROM webhook_attempts WHERE created_at < ${before} LIMIT ${limit}`,
      PRUNE_BATCH,
    );
    // After the deliveries: the events whose last delivery just went can go too.
    await pruneEvents(this.opts.db, before);
  }
}
