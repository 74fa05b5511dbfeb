import type { ServerResponse } from 'node:http';
import { AppError, Unavailable } from '../errors.js';
import { OpenStreams, SseWriter } from '../realtime/sse.js';
import type { StreamEnd, VisitorContext, WebchatService } from './webchat.service.js';
import { HISTORY_LIMIT } from './webchat.repository.js';

/**
 * How far apart the clocks of the processes that store messages may be: a message's
 * `created_at` is its process's clock, and a stream's cursor the newest `created_at` it sent.
 */
export const CLOCK_TOLERANCE_MS = 30_000;
/**
 * Messages are read again from this long before the newest one sent: commits can land late
 * (10 s), and a message stored by a process whose clock is behind carries an earlier time.
 */
const OVERLAP_MS = 10_000 + CLOCK_TOLERANCE_MS;
/** While wake-ups from other processes do not arrive, a stream reads this often. */
const POLL_MS = 1_000;

export interface VisitorStreamLimits {
  /** Open streams of one visitor in one process; one more ends the oldest (`replaced`). */
  streamsPerVisitor?: number;
  /** Open widget streams in one process; beyond, a 503 with Retry-After. */
  streamsPerProcess?: number;
  /**
   * Open widget streams of one account in one process; beyond, a 503 with Retry-After: a client
   * that makes visitors by the thousand (a session needs nothing) fills its own account's
   * share, not the process.
   */
  streamsPerAccount?: number;
  /** Open widget streams from one client address in one process; beyond, a 429 with Retry-After. */
  streamsPerAddress?: number;
  /** How long a stream lives; it then ends without an `end` event and EventSource reconnects. */
  streamLifetimeMs?: number;
  /**
   * How much a stream may have written that its client has not read yet; beyond, it is dropped
   * (the widget resumes from its Last-Event-ID), rather than held in this process's memory.
   */
  maxBufferedBytes?: number;
  /** How often a stream sends `event: ping`, which the widget watches to tell it is alive. */
  pingMs?: number;
}

/** Where a stream comes from: the caps are counted by account, visitor and client address. */
export interface StreamOwner {
  accountId: string;
  visitorId: string;
  address: string;
}

/** One address holds as many streams as it may: a 429, as its rate limits are. */
export class TooManyStreams extends AppError {
  readonly retryAfterSeconds = 30;
  constructor(limit: number) {
    super(
      'rate_limited',
      `at most ${limit} widget streams may be open from one address; retry in 30 s`,
    );
  }
}

/** Why a stream ends with an `end` event: the service's reasons, or a newer stream took its place. */
export type EndReason = StreamEnd | 'replaced';

/**
 * The process's open widget streams: capped per visitor, per account, per client address and
 * per process, each living at most streamLifetimeMs, and all ended at shutdown (without an `end`
 * event, so that each widget reconnects, to another process).
 */
export class VisitorStreams {
  /** Counted by `account <id>` and `address <ip>`. */
  private readonly open = new OpenStreams<VisitorStream>();
  /** Each visitor's open streams, oldest first. */
  private readonly byVisitor = new Map<string, VisitorStream[]>();
  private readonly limits: Required<VisitorStreamLimits>;

  constructor(private readonly deps: { webchat: WebchatService; limits?: VisitorStreamLimits }) {
    this.limits = {
      streamsPerVisitor: deps.limits?.streamsPerVisitor ?? 5,
      streamsPerProcess: deps.limits?.streamsPerProcess ?? 20_000,
      streamsPerAccount: deps.limits?.streamsPerAccount ?? 5_000,
      streamsPerAddress: deps.limits?.streamsPerAddress ?? 50,
      streamLifetimeMs: deps.limits?.streamLifetimeMs ?? 3_600_000,
      maxBufferedBytes: deps.limits?.maxBufferedBytes ?? 256 * 1024,
      pingMs: deps.limits?.pingMs ?? 20_000,
    };
  }

  /** Streams open in this process. */
  get size(): number {
    return this.open.size;
  }

  /**
   * Refuses one more stream: 429 beyond the address's cap, 503 beyond the account's or the
   * process's, or while shutting down. A visitor at their own cap replaces their oldest stream,
   * which leaves their account's count as it was.
   */
  admit(owner: StreamOwner): void {
    const { limits } = this;
    this.open.refuseWhileClosing();
    if (this.open.count(addressKey(owner.address)) >= limits.streamsPerAddress)
      throw new TooManyStreams(limits.streamsPerAddress);
    const replaces =
      (this.byVisitor.get(visitorKey(owner))?.length ?? 0) >= limits.streamsPerVisitor;
    if (!replaces && this.open.count(accountKey(owner.accountId)) >= limits.streamsPerAccount)
      throw new Unavailable(
        `this server holds ${limits.streamsPerAccount} streams of this widget, its most; retry shortly`,
        30,
      );
    if (this.open.size >= limits.streamsPerProcess)
      throw new Unavailable(
        `this server holds ${limits.streamsPerProcess} widget streams, its most; retry shortly`,
        5,
      );
  }

  /**
   * Streams the visitor's conversation on `res`, whose headers are written, from `since` (see
   * VisitorStream). The visitor's oldest stream ends (`replaced`) beyond its cap: a visitor's
   * streams beyond a few are tabs left open or connections dead without a word, and the newest
   * is the one they look at.
   */
  openStream(
    res: ServerResponse,
    ctx: VisitorContext,
    since: Date,
    origin: string,
    address: string,
  ): void {
    // A client gone while the stream was being opened: its response has closed already.
    if (res.destroyed || !res.socket || res.socket.destroyed) return;
    const owner = { accountId: ctx.widget.accountId, visitorId: ctx.visitor.id, address };
    const key = visitorKey(owner);
    const mine = this.byVisitor.get(key) ?? [];
    this.byVisitor.set(key, mine);
    const stream: VisitorStream = new VisitorStream({
      res,
      webchat: this.deps.webchat,
      ctx,
      since,
      origin,
      pingMs: this.limits.pingMs,
      lifetimeMs: this.limits.streamLifetimeMs,
      maxBufferedBytes: this.limits.maxBufferedBytes,
      onClosed: () => {
        this.open.remove(stream);
        const at = mine.indexOf(stream);
        if (at >= 0) mine.splice(at, 1);
        if (mine.length === 0 && this.byVisitor.get(key) === mine) this.byVisitor.delete(key);
      },
    });
    this.open.add(stream, [accountKey(owner.accountId), addressKey(address)]);
    mine.push(stream);
    while (mine.length > this.limits.streamsPerVisitor) mine[0]!.end('replaced');
    stream.start();
  }

  /** Ends every open stream and refuses new ones (server shutdown). */
  closeAll(): void {
    this.open.closeAll();
  }
}

function visitorKey(owner: StreamOwner): string {
  return `${owner.accountId} ${owner.visitorId}`;
}

const accountKey = (accountId: string) => `account ${accountId}`;
const addressKey = (address: string) => `address ${address}`;

/**
 * One open widget stream (Server-Sent Events): every message of the visitor's conversation
 * created from `since` on, as `event: message` with the message's creation time as its `id`,
 * so that EventSource's automatic reconnection (Last-Event-ID) resumes where it stopped. The
 * window read on each wake-up overlaps the last one by OVERLAP_MS; the widget keeps messages
 * by id, so a message sent twice shows once. Each wake-up first looks the widget and the
 * visitor up again: a stream the visitor may no longer have ends with `event: end`.
 */
class VisitorStream {
  private ctx: VisitorContext;
  /** Who the stream was opened as: a visitor no longer them must identify again. */
  private readonly identifier: string | null;
  private cursor: number;
  /** The messages sent that a read may meet again (those within OVERLAP_MS of the cursor). */
  private readonly sent = new Map<string, number>();
  private running = false;
  private again = false;
  private unsubscribe: () => void = () => undefined;
  private key: string | null = null;
  private readonly sse: SseWriter;

  constructor(
    private readonly o: {
      res: ServerResponse;
      webchat: WebchatService;
      ctx: VisitorContext;
      since: Date;
      origin: string;
      pingMs: number;
      lifetimeMs: number;
      maxBufferedBytes: number;
      onClosed: () => void;
    },
  ) {
    this.ctx = o.ctx;
    this.identifier = o.ctx.visitor.identifier;
    this.cursor = o.since.getTime();
    this.sse = new SseWriter(o.res, {
      // EventSource reconnects after 1 s rather than its default 3 s.
      retryMs: 1_000,
      opening: { event: 'ready', data: '{}' },
      // A named event, not a comment: the widget's script sees it, and reconnects when none came.
      keepAlive: { event: 'ping', data: '{}' },
      keepAliveMs: o.pingMs,
      maxBufferedBytes: o.maxBufferedBytes,
      // Up to a tenth sooner, so that streams opened together do not all come back together.
      // Without an `end` event: EventSource reconnects (with Last-Event-ID), perhaps elsewhere.
      lifetimeMs: o.lifetimeMs,
      lifetimeJitter: 0.1,
      tickMs: POLL_MS,
      onTick: () => {
        if (!this.o.webchat.wakeups.live) this.wake();
      },
      onEnd: () => {
        this.unsubscribe();
        this.o.onClosed();
      },
    });
  }

  private get closed(): boolean {
    return this.sse.closed;
  }

  start(): void {
    this.subscribe();
    this.sse.start();
    this.wake();
  }

  /**
   * Ends the stream: with an `end` event `{ reason }` when the widget must act on it rather
   * than reconnect (see EndReason), or bare (shutdown), and EventSource reconnects.
   */
  end(reason?: EndReason): void {
    this.sse.end(reason ? { event: 'end', data: JSON.stringify({ reason }) } : undefined);
  }

  private subscribe(): void {
    // Before its first message an anonymous visitor has no contact: it listens under its own id
    // until it has one.
    const next = this.ctx.visitor.contact_id ?? this.ctx.visitor.id;
    if (next === this.key) return;
    this.unsubscribe();
    this.key = next;
    this.unsubscribe = this.o.webchat.wakeups.subscribe(this.ctx.widget.accountId, next, this.wake);
  }

  private async flush(): Promise<void> {
    const now = await this.o.webchat.recheck(this.ctx, {
      origin: this.o.origin,
      identifier: this.identifier,
    });
    if (this.closed) return;
    if (typeof now === 'string') return this.end(now);
    this.ctx = now;
    this.subscribe();
    // Page by page after (created_at, id), from OVERLAP_MS before the newest message sent: a
    // window holding more than a page is read to its end, and one page never holds the stream.
    let after: { at: Date; id: string } | null = { at: new Date(this.cursor - OVERLAP_MS), id: '' };
    while (after) {
      const page = await this.o.webchat.messagePage(this.ctx, after, HISTORY_LIMIT);
      if (this.closed) return;
      for (const m of page.messages) {
        if (this.sent.has(m.id)) continue;
        const at = Date.parse(m.created_at);
        this.sent.set(m.id, at);
        this.cursor = Math.max(this.cursor, at);
        this.sse.send({ id: m.created_at, event: 'message', data: JSON.stringify(m) });
        if (this.closed) return;
      }
      after = page.next;
    }
    // What lies before the next read's window is never met again.
    for (const [id, at] of this.sent) if (at < this.cursor - OVERLAP_MS) this.sent.delete(id);
  }

  private readonly wake = (): void => {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void (async () => {
      do {
        this.again = false;
        try {
          await this.flush();
        } catch {
          // The next wake-up or poll tries again; the widget reconnects if the stream ends.
        }
      } while (this.again && !this.closed);
      this.running = false;
    })();
  };
}
