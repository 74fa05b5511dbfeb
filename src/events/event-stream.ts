import { PassThrough } from 'node:stream';
import { SseWriter } from '../realtime/sse.js';
import type { EventFeed } from './event-feed.js';
import { WEBHOOK_TEST_EVENT } from './event-types.js';
import type { StreamPosition } from './events.repository.js';
import type { Presence, PresenceUpdate } from './presence.js';
import type { SharedEventReads } from './shared-reads.js';

/** Events read (and at most buffered beyond the socket's own buffer) at once. */
const BATCH = 100;
/** The first re-read of events held behind a running transaction; it doubles up to `pollMs`. */
const HELD_FIRST_MS = 50;
/** The reconnection delay the `retry:` field suggests to EventSource clients. */
export const RETRY_HINT_MS = 2_000;

interface Log {
  warn(obj: object, msg: string): void;
}

export interface EventStreamOptions {
  accountId: string;
  /** Only these types are sent; null for all. */
  types: readonly string[] | null;
  /** The stream sends the events after this place. */
  from: StreamPosition;
  /** Written as the opening's `id:`: the place a client dropped before any event resumes from. */
  startId?: string;
  reads: SharedEventReads;
  feed: EventFeed;
  log: Log;
  /** How long after a failed read (the database unreachable) it reads again. */
  pollMs: number;
  /** The stream ends after this long (the client reconnects with Last-Event-ID); 0 never. */
  lifetimeMs?: number;
  batchSize?: number;
  /** Called once when the stream has ended, whoever ended it. */
  onClosed: () => void;
  /** Where `presence.updated` comes from (sent when `types` wants it), if anywhere. */
  presence?: Presence;
}

/**
 * One account's events as Server-Sent Events, written to `output`: each in the webhook
 * envelope (the exact bytes a webhook would receive), with the event id as `id:` and its type as
 * `event:`. Woken by the event feed, it reads what follows its cursor (a read shared with the
 * account's other streams that stand where it does) and writes it; when the
 * client reads slowly it waits for the socket to drain before reading more, so a stream holds at
 * most one batch in memory. Ending `output` (or the client going away, which destroys it) frees
 * everything: the feed subscription and the timers.
 */
export class EventStream {
  readonly output = new PassThrough();
  private readonly sse: SseWriter;
  private cursor: StreamPosition;
  private readonly unsubscribe: () => void;
  private pending = true;
  private pumping = false;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  private heldDelayMs = HELD_FIRST_MS;

  constructor(private readonly opts: EventStreamOptions) {
    this.cursor = opts.from;
    this.sse = new SseWriter(this.output, {
      retryMs: RETRY_HINT_MS,
      openingId: opts.startId,
      keepAlive: { comment: 'keep-alive' },
      lifetimeMs: opts.lifetimeMs,
      onEnd: () => this.cleanUp(),
    }).start();
    const unsubscribeFeed = opts.feed.subscribe(opts.accountId, () => this.wake());
    const unsubscribePresence =
      opts.presence && (opts.types === null || opts.types.includes('presence.updated'))
        ? opts.presence.subscribe(opts.accountId, (update) => this.sendPresence(update))
        : () => {};
    this.unsubscribe = () => {
      unsubscribeFeed();
      unsubscribePresence();
    };
    void this.pump();
  }

  /** A comment line, so that proxies and load balancers see traffic on an idle stream. */
  keepAlive(): void {
    this.sse.keepAlive();
  }

  /** Ends the stream (server shutdown); the client reconnects with Last-Event-ID elsewhere. */
  end(): void {
    this.sse.end();
  }

  /**
   * Ends the stream with `event: end` `{ reason }`: its credential is gone, and reconnecting
   * with it would only be refused.
   */
  endFor(reason: string): void {
    this.sse.end({ event: 'end', data: JSON.stringify({ reason }) });
  }

  /**
   * A presence update, with no `id:` (it is not an event a client can resume after, and is
   * never replayed). Dropped, not queued, while the client is behind: it is stale in 30 s.
   */
  private sendPresence(update: PresenceUpdate): void {
    if (this.closed || this.output.writableNeedDrain) return;
    const body = { event: 'presence.updated', timestamp: new Date().toISOString(), data: update };
    this.sse.send({ event: 'presence.updated', data: JSON.stringify(body) });
  }

  private wake(): void {
    if (this.closed) return;
    this.pending = true;
    if (!this.pumping) void this.pump();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.pending && !this.closed) {
        this.pending = false;
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        const limit = this.opts.batchSize ?? BATCH;
        const { reads, types } = this.opts;
        const batch = await reads.readAfter(this.opts.accountId, this.cursor, limit);
        if (this.closed) return;
        let writable = true;
        for (const e of batch.events) {
          this.cursor = e.position;
          // A webhook's test event is that webhook's alone (see WEBHOOK_TEST_EVENT).
          if (types === null ? e.type === WEBHOOK_TEST_EVENT : !types.includes(e.type)) continue;
          writable = this.sse.send({ id: e.id, event: e.type, data: reads.body(e) });
        }
        if (batch.events.length === limit) this.pending = true;
        if (!writable) await this.sse.drained();
        if (batch.held) this.later(this.heldDelayMs, true);
        else this.heldDelayMs = HELD_FIRST_MS;
      }
    } catch (err) {
      // The database is unreachable (or the read failed): the stream stays open and tries
      // again; the client sees only a pause.
      this.opts.log.warn({ err, account: this.opts.accountId }, 'event stream read failed');
      this.later(this.opts.pollMs, false);
    } finally {
      this.pumping = false;
    }
    // A wake-up that came while the last read was being written.
    if (this.pending && !this.closed) void this.pump();
  }

  /** Reads again after `ms` even if nothing wakes the stream. */
  private later(ms: number, held: boolean): void {
    if (this.closed || this.timer) return;
    if (held) this.heldDelayMs = Math.min(this.heldDelayMs * 2, this.opts.pollMs);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.wake();
    }, ms);
    this.timer.unref();
  }

  private cleanUp(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.opts.onClosed();
  }
}
