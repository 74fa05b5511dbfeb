import {
  AggregatorRegistry,
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';
import type { QueueStats } from './queue-stats.js';

export const METRICS_PREFIX = 'switchboard_';
/** The route label of a request that matched no route: raw paths would let clients mint series. */
export const UNMATCHED_ROUTE = 'unmatched';

/** What one webhook delivery attempt came to: delivered, failed with a retry ahead, or given up. */
export type DeliveryOutcome = 'success' | 'failure' | 'gave_up';

type MetricJson = MetricObjectWithValues<MetricValue<string>>;

/** The process-wide series (CPU, memory, event loop): one thread's are the process's. */
const PROCESS_WIDE = [`${METRICS_PREFIX}process_`, `${METRICS_PREFIX}nodejs_`];
/** The kinds a source adds to this registry (prom-client's JSON names them as strings). */
const SUMMED_TYPES = new Set(['counter', 'histogram']);
const isProcessWide = (name: string) => PROCESS_WIDE.some((prefix) => name.startsWith(prefix));

type HttpChild = Histogram.Internal<'route' | 'method' | 'status_code'>;

/** `2xx`…`5xx`, or `network` when no HTTP answer came (refused, timed out, blocked). */
export function statusClass(statusCode: number | null): string {
  if (statusCode === null) return 'network';
  return `${Math.floor(statusCode / 100)}xx`;
}

/**
 * The service's Prometheus instruments, in a registry of their own (never prom-client's global
 * one), so that several apps in one process each count alone. Labels are bounded sets chosen by
 * the code (route patterns, methods, statuses, kinds, channels): never an id, URL or other value
 * a client sends.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Counters kept elsewhere in this process (the all-in-one service's worker thread). */
  private readonly sources: (() => Promise<MetricJson[]>)[] = [];
  private readonly httpDuration: Histogram<'route' | 'method' | 'status_code'>;
  /** route → method → status → child: three map lookups per request, no key strings built. */
  private readonly httpChildren = new Map<string, Map<string, Map<number, HttpChild>>>();
  private readonly jobsQueued: Gauge<'kind'>;
  private readonly jobsDue: Gauge<'kind'>;
  private readonly jobsDead: Gauge<'kind'>;
  private readonly jobsOldestDueAge: Gauge<'kind'>;
  private readonly deliveriesPending: Gauge;
  private readonly deliveriesDue: Gauge;
  private readonly deliveriesOldestDueAge: Gauge;
  private readonly webhookAttempts: Counter<'outcome' | 'status_class'>;
  private readonly webhookDuration: Histogram<'status_class'>;
  private readonly broadcastRecipientsSent: Counter.Internal;
  private readonly broadcastRecipientsFailed: Counter.Internal;
  private readonly providerErrors: Counter<'channel' | 'provider'>;

  constructor() {
    const registers = [this.registry];
    const p = METRICS_PREFIX;
    collectDefaultMetrics({ register: this.registry, prefix: p });

    this.httpDuration = new Histogram({
      name: `${p}http_request_duration_seconds`,
      help: 'HTTP requests by route pattern, method and status code: time to the last byte of the response (_count is the request count)',
      labelNames: ['route', 'method', 'status_code'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });

    this.jobsQueued = new Gauge({
      name: `${p}jobs_queued`,
      help: 'Jobs in the queue by kind: due, running or scheduled for later',
      labelNames: ['kind'],
      registers,
    });
    this.jobsDue = new Gauge({
      name: `${p}jobs_due`,
      help: 'Jobs due and waiting for a worker, by kind',
      labelNames: ['kind'],
      registers,
    });
    this.jobsDead = new Gauge({
      name: `${p}jobs_dead`,
      help: 'Dead jobs by kind: their retries ran out (switchboard jobs dead lists them)',
      labelNames: ['kind'],
      registers,
    });
    this.jobsOldestDueAge = new Gauge({
      name: `${p}jobs_oldest_due_age_seconds`,
      help: 'How long the oldest job waiting for a worker has been due, by kind (0 when none waits)',
      labelNames: ['kind'],
      registers,
    });
    this.deliveriesPending = new Gauge({
      name: `${p}webhook_deliveries_pending`,
      help: 'Webhook deliveries not yet delivered or given up: due, in flight or waiting for a retry',
      registers,
    });
    this.deliveriesDue = new Gauge({
      name: `${p}webhook_deliveries_due`,
      help: 'Webhook deliveries whose next attempt is due now',
      registers,
    });
    this.deliveriesOldestDueAge = new Gauge({
      name: `${p}webhook_deliveries_oldest_due_age_seconds`,
      help: 'How long the oldest due webhook delivery has been due (0 when none is)',
      registers,
    });

    this.webhookAttempts = new Counter({
      name: `${p}webhook_attempts_total`,
      help: 'Webhook delivery attempts by outcome (success, failure with a retry ahead, gave_up) and status class of the answer',
      labelNames: ['outcome', 'status_class'],
      registers,
    });
    this.webhookDuration = new Histogram({
      name: `${p}webhook_attempt_duration_seconds`,
      help: 'Webhook delivery attempts: time until the receiver answered or the attempt failed, by status class',
      labelNames: ['status_class'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });

    const broadcastRecipients = new Counter({
      name: `${p}broadcast_recipients_total`,
      help: 'Broadcast recipients processed, by outcome: sent (accepted by the provider) or failed',
      labelNames: ['outcome'],
      registers,
    });
    this.broadcastRecipientsSent = broadcastRecipients.labels('sent');
    this.broadcastRecipientsFailed = broadcastRecipients.labels('failed');
    // Both series exist from the start, so rate() works from the first broadcast on.
    this.broadcastRecipientsSent.inc(0);
    this.broadcastRecipientsFailed.inc(0);

    this.providerErrors = new Counter({
      name: `${p}provider_errors_total`,
      help: "Sends a channel's provider refused or failed, by channel and provider",
      labelNames: ['channel', 'provider'],
      registers,
    });
  }

  /** One finished HTTP request; `route` is the route's pattern, or undefined when none matched. */
  observeRequest(
    route: string | undefined,
    method: string,
    statusCode: number,
    seconds: number,
  ): void {
    const r = route ?? UNMATCHED_ROUTE;
    let byMethod = this.httpChildren.get(r);
    if (!byMethod) this.httpChildren.set(r, (byMethod = new Map<string, Map<number, HttpChild>>()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map<number, HttpChild>()));
    let child = byStatus.get(statusCode);
    if (!child) {
      child = this.httpDuration.labels(r, method, String(statusCode));
      byStatus.set(statusCode, child);
    }
    child.observe(seconds);
  }

  /** One webhook delivery attempt; `statusCode` null when no HTTP answer came. */
  webhookAttempt(outcome: DeliveryOutcome, statusCode: number | null, seconds: number): void {
    const cls = statusClass(statusCode);
    this.webhookAttempts.labels(outcome, cls).inc();
    this.webhookDuration.labels(cls).observe(seconds);
  }

  /** Recipients of a broadcast batch, counted once the batch committed. */
  broadcastRecipients(sent: number, failed: number): void {
    if (sent > 0) this.broadcastRecipientsSent.inc(sent);
    if (failed > 0) this.broadcastRecipientsFailed.inc(failed);
  }

  providerError(channel: string, provider: string): void {
    this.providerErrors.labels(channel, provider).inc();
  }

  /**
   * This registry's counters and histograms, for another registry of the process to expose with
   * its own (see addSource): never the process-wide series, nor the gauges, which the exposing
   * registry sets (or leaves out) at each scrape.
   */
  async ownCounters(): Promise<MetricJson[]> {
    const all = await this.registry.getMetricsAsJSON();
    return all.filter((m) => !isProcessWide(m.name) && SUMMED_TYPES.has(String(m.type)));
  }

  /**
   * Series counted in another registry of this process (its `ownCounters`), added to this one's
   * on every scrape: a counter both count is summed.
   */
  addSource(source: () => Promise<MetricJson[]>): void {
    this.sources.push(source);
  }

  /**
   * The exposition text, with the queue gauges set from `queues` (read at scrape time), or
   * left out when they could not be read.
   */
  async expose(queues: QueueStats | null): Promise<string> {
    for (const gauge of [this.jobsQueued, this.jobsDue, this.jobsDead, this.jobsOldestDueAge])
      gauge.reset();
    for (const gauge of [this.deliveriesPending, this.deliveriesDue, this.deliveriesOldestDueAge]) {
      gauge.reset();
      // reset() leaves a label-less gauge at 0; removing its one series leaves no sample at all.
      if (!queues) gauge.remove();
    }
    if (!queues) return this.text();
    for (const j of queues.jobs) {
      this.jobsQueued.labels(j.kind).set(j.queued);
      this.jobsDue.labels(j.kind).set(j.due);
      this.jobsDead.labels(j.kind).set(j.dead);
      this.jobsOldestDueAge.labels(j.kind).set(j.oldestDueAgeSeconds);
    }
    this.deliveriesPending.set(queues.webhookDeliveries.pending);
    this.deliveriesDue.set(queues.webhookDeliveries.due);
    this.deliveriesOldestDueAge.set(queues.webhookDeliveries.oldestDueAgeSeconds);
    return this.text();
  }

  /**
   * The registry's text; with sources, their counters summed with this registry's. The registry
   * is read once: prom-client resets its event-loop lag figures at every read.
   */
  private async text(): Promise<string> {
    if (this.sources.length === 0) return this.registry.metrics();
    const [all, ...others] = await Promise.all([
      this.registry.getMetricsAsJSON(),
      ...this.sources.map((source) => source()),
    ]);
    // The process-wide series are this thread's as they are: no source has them, and their own
    // aggregators would average some and drop the start time.
    const mine = all.map((m) =>
      isProcessWide(m.name) ? { ...m, aggregator: 'first' as const } : m,
    );
    return AggregatorRegistry.aggregate([mine, ...others]).metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
