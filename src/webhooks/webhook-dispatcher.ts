import https from 'node:https';
import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Db } from '../db/database.js';
import { EVENT_RETENTION_MS, pruneEvents } from '../events/retention.js';
import { deleteInBatches } from '../db/retention.js';
import type { Metrics } from '../metrics/metrics.js';
import { PollLoop } from '../jobs/poll-loop.js';
import { DELIVERY_TIMEOUT_MS, sendAttempt, type Claimed } from './delivery-attempt.js';
import { DeliveryBooks } from './delivery-books.js';
import type { WebhookSecrets } from './webhook-secrets.js';

export { DELIVERY_TIMEOUT_MS } from './delivery-attempt.js';
export { DISABLE_AFTER_FAILING_MS } from './delivery-books.js';

/** Rows deleted per statement when pruning deliveries and attempts. */
const PRUNE_BATCH = 5_000;

/** The recorded error of an attempt whose webhook's secret this process cannot open. */
export const UNREADABLE_SECRET =
  "the webhook's signing secret cannot be read with this SECRETS_KEY: start the service with the key it was stored under";

export interface DispatcherOptions {
  db: Db;
  clock: Clock;
  log: FastifyBaseLogger;
  allowPrivate: boolean;
  /** Opens the webhooks' signing secrets (sealed under SECRETS_KEY). */
  secrets: WebhookSecrets;
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
  /** Outcomes recorded, grouped (see DeliveryBooks). */
  private readonly books: DeliveryBooks;

  constructor(private readonly opts: DispatcherOptions) {
    this.maxInFlight = opts.maxInFlight ?? 256;
    this.perWebhook = opts.perWebhook ?? 32;
    this.leaseMs = opts.leaseMs ?? DELIVERY_TIMEOUT_MS + 20_000;
    this.pollIntervalMs = opts.pollIntervalMs ?? 50;
    this.retentionMs = opts.retentionMs ?? EVENT_RETENTION_MS;
    this.books = new DeliveryBooks({
      db: opts.db,
      clock: opts.clock,
      log: opts.log,
      random: opts.random ?? Math.random,
      metrics: opts.metrics,
    });
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
      SELECT c.account_id, c.webhook_id, c.event_id, c.attempts, w.url, w.secret_box, e.type, e.data, e.created_at
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
    const secret = this.opts.secrets.open(d.secret_box);
    if (secret === null) {
      // Nothing is sent unsigned: the attempt fails, is logged and retried on the schedule, so
      // deliveries resume once the service runs with the right key again.
      answered();
      await this.books.record(
        d,
        { kind: 'failed', statusCode: null, error: UNREADABLE_SECRET, excerpt: null },
        0,
      );
      return;
    }
    const { outcome, durationMs } = await sendAttempt(
      d,
      secret,
      { clock: this.opts.clock, allowPrivate: this.opts.allowPrivate, agent: this.agent },
      answered,
    );
    await this.books.record(d, outcome, durationMs);
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
