import type { ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { Unavailable } from '../errors.js';

/** The content type of every Server-Sent Events response. */
export const SSE_CONTENT_TYPE = 'text/event-stream; charset=utf-8';

/**
 * Takes the response from Fastify and sends its headers at once (with those the request's hooks
 * set), before any event: a client waits for them to know the stream is open.
 */
export function hijackForSse(
  reply: FastifyReply,
  cacheControl: 'no-cache' | 'no-store',
): ServerResponse {
  reply.hijack();
  reply.raw.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string>),
    'Content-Type': SSE_CONTENT_TYPE,
    'Cache-Control': cacheControl,
    Connection: 'keep-alive',
    // Proxies (nginx) must pass events on as they come.
    'X-Accel-Buffering': 'no',
  });
  return reply.raw;
}

/** One message: `id:` and `event:` when given, and `data:` (one line). */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/**
 * Why a stream ended: its owner ended it (`ended`), it lived its time (`expired`), its client
 * left more unread than the cap (`dropped`), or its client went away (`gone`).
 */
export type SseEnd = 'ended' | 'expired' | 'dropped' | 'gone';

export interface SseWriterOptions {
  /** The reconnection delay the first line (`retry:`) suggests to EventSource clients. */
  retryMs: number;
  /** Written with the `retry:` line, at once (a `ready` event). */
  opening?: SseMessage;
  /**
   * An `id:` written with the `retry:` line, in a message of no data: EventSource keeps it as
   * its last event id without dispatching anything, so a client dropped before any event
   * resumes from the stream's start.
   */
  openingId?: string;
  /** What a keep-alive writes: a comment (`: keep-alive`) or a message (`event: ping`). */
  keepAlive: { comment: string } | SseMessage;
  /** Sends a keep-alive this often; without, the owner calls keepAlive() (one timer for many). */
  keepAliveMs?: number;
  /**
   * How much the client may leave unread; beyond, the stream is dropped (the client resumes
   * from its Last-Event-ID) rather than held in this process's memory. Unbounded without: a
   * writer that waits for `drained()` holds little.
   */
  maxBufferedBytes?: number;
  /** The stream ends (bare: EventSource reconnects) after this long; never without (or 0). */
  lifetimeMs?: number;
  /** Up to this fraction sooner, so that streams opened together do not all come back together. */
  lifetimeJitter?: number;
  /**
   * Calls `onTick` this often; the lifetime is then looked at on the tick rather than given a
   * timer of its own (thousands of hour-long timers would live on into V8's old generation,
   * collected there in pauses).
   */
  tickMs?: number;
  onTick?: () => void;
  /** Called once, when the stream has ended, whoever ended it. */
  onEnd: (why: SseEnd) => void;
}

/**
 * One Server-Sent Events stream, written to `out` (the response, or a stream Fastify sends):
 * the `retry:` line at once, messages, keep-alives, backpressure (`write` returns false while
 * the client's buffer is full, `drained()` waits; past `maxBufferedBytes` the stream is
 * dropped), a lifetime, and one end, reported once with its reason, whoever ends it.
 */
export class SseWriter {
  private done = false;
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly out: Writable,
    private readonly o: SseWriterOptions,
  ) {}

  /** Writes the opening and starts the timers; the stream ends with `out` (a client gone). */
  start(): this {
    this.out.on('close', () => this.finish('gone'));
    // A write after the client went away is not an error worth more than ending the stream.
    this.out.on('error', () => this.finish('gone'));
    const { o } = this;
    const id = o.openingId === undefined ? '' : `id: ${o.openingId}\n`;
    this.write(`retry: ${o.retryMs}\n${o.opening ? `${id}${format(o.opening)}` : `${id}\n`}`);
    if (this.done) return this; // dropped already
    if (o.keepAliveMs) this.timers.push(setInterval(() => this.keepAlive(), o.keepAliveMs));
    if (o.lifetimeMs) {
      const lifetimeMs = o.lifetimeMs * (1 - Math.random() * (o.lifetimeJitter ?? 0));
      if (o.tickMs) {
        const endsAt = Date.now() + lifetimeMs;
        this.timers.push(
          setInterval(() => {
            if (Date.now() >= endsAt) return this.end(undefined, 'expired');
            o.onTick?.();
          }, o.tickMs),
        );
      } else {
        const lifetime = setTimeout(() => this.end(undefined, 'expired'), lifetimeMs);
        lifetime.unref();
        this.timers.push(lifetime);
      }
    } else if (o.tickMs) this.timers.push(setInterval(() => o.onTick?.(), o.tickMs));
    return this;
  }

  /** Whether the stream has ended. */
  get closed(): boolean {
    return this.done;
  }

  /** Writes a message; false when the client's buffer is full (see `drained`) or it ended. */
  send(message: SseMessage): boolean {
    return this.write(format(message));
  }

  /** A keep-alive, so that proxies and load balancers (and the widget) see traffic. */
  keepAlive(): void {
    const k = this.o.keepAlive;
    this.write('comment' in k ? `: ${k.comment}\n\n` : format(k));
  }

  /** Resolves when the client has read what is buffered, or the stream has ended. */
  drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.out.off('drain', done);
        this.out.off('close', done);
        resolve();
      };
      this.out.on('drain', done);
      this.out.on('close', done);
    });
  }

  /**
   * Ends the stream, with a last message when the client must act on it rather than reconnect,
   * or bare (shutdown, lifetime), and EventSource reconnects.
   */
  end(last?: SseMessage, why: SseEnd = 'ended'): void {
    if (this.done) return;
    if (last) this.send(last);
    if (this.done || this.out.destroyed) return; // dropped, its client not reading
    this.out.end();
    this.finish(why);
  }

  private write(text: string): boolean {
    if (this.done) return false;
    const writable = this.out.write(text);
    // A client that does not read what it is sent would have this process hold every later
    // message: past the cap its connection is dropped, and it resumes from Last-Event-ID.
    if (
      this.o.maxBufferedBytes !== undefined &&
      this.out.writableLength > this.o.maxBufferedBytes
    ) {
      this.out.destroy();
      this.finish('dropped');
      return false;
    }
    return writable;
  }

  private finish(why: SseEnd): void {
    if (this.done) return;
    this.done = true;
    for (const timer of this.timers) clearInterval(timer);
    this.o.onEnd(why);
  }
}

function format(m: SseMessage): string {
  return `${m.id === undefined ? '' : `id: ${m.id}\n`}${m.event === undefined ? '' : `event: ${m.event}\n`}data: ${m.data}\n\n`;
}

/**
 * The process's open streams of one kind, counted by the keys their caps are kept by (account,
 * client address, …): each kind checks its own caps, in its own words, against these counts.
 * At shutdown every stream ends and new ones are refused.
 */
export class OpenStreams<S extends { end(): void }> {
  private readonly open = new Map<S, readonly string[]>();
  private readonly counts = new Map<string, number>();
  private closing = false;

  /** Streams open. */
  get size(): number {
    return this.open.size;
  }

  /** Streams open under the key. */
  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /** Refuses a stream while the server shuts down (503). */
  refuseWhileClosing(): void {
    if (this.closing) throw new Unavailable('the server is shutting down', 1);
  }

  /** Counts the stream under each of its keys until it is removed. */
  add(stream: S, keys: readonly string[]): void {
    this.open.set(stream, keys);
    for (const key of keys) this.counts.set(key, this.count(key) + 1);
  }

  /** Whether the stream was open (and is no longer counted). */
  remove(stream: S): boolean {
    const keys = this.open.get(stream);
    if (!keys) return false;
    this.open.delete(stream);
    for (const key of keys) {
      const n = this.count(key) - 1;
      if (n > 0) this.counts.set(key, n);
      else this.counts.delete(key);
    }
    return true;
  }

  /** Every open stream. */
  streams(): IterableIterator<S> {
    return this.open.keys();
  }

  /** Ends every open stream and refuses new ones (server shutdown). */
  closeAll(): void {
    this.closing = true;
    for (const stream of [...this.open.keys()]) stream.end();
  }
}
