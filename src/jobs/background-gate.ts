import type { TopicListener } from '../realtime/notifications.js';

/** The channel on which API processes say that an interactive send began (no payload). */
export const INTERACTIVE_CHANNEL = 'switchboard_interactive';

export interface BackgroundGateOptions {
  /**
   * How long background work holds back after an interactive send began, here or in another
   * process (BACKGROUND_YIELD_MS); 0 turns the gate off (it never closes, nothing is published).
   */
  yieldMs: number;
  /** The longest one `pass` waits, however busy interactive work stays (4 × yieldMs). */
  maxWaitMs?: number;
  /**
   * Tells the other processes that an interactive send began here (a NOTIFY on
   * INTERACTIVE_CHANNEL); called at most once every yieldMs / 2. Its failures are ignored.
   */
  publish?: () => Promise<unknown>;
  now?: () => number;
}

const noop = () => undefined;

/**
 * Interactive sends first. Background work (a broadcast's batches and provider calls) passes
 * through `pass` before each step; the gate is closed while an interactive send (an API send)
 * is in flight in this process, and for `yieldMs` after one began in this or any other process
 * that publishes to the same database (heard through LISTEN, see `listener`). A closed gate
 * holds a step back until it opens, or for `maxWaitMs` at most: under a steady stream of
 * interactive sends background work slows down but never stops.
 */
export class BackgroundGate {
  private inFlight = 0;
  private heldUntil = 0;
  private lastPublished = -Infinity;
  private opening: { promise: Promise<void>; resolve: () => void } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly maxWaitMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: BackgroundGateOptions) {
    this.maxWaitMs = opts.maxWaitMs ?? opts.yieldMs * 4;
    this.now = opts.now ?? (() => performance.now());
  }

  /** Whether background work is held back now. */
  get closed(): boolean {
    return this.inFlight > 0 || this.now() < this.heldUntil;
  }

  /**
   * An interactive send begins in this process: the gate closes here (and, through `publish`,
   * elsewhere) until the returned function is called and `yieldMs` has passed.
   */
  interactive(): () => void {
    if (this.opts.yieldMs <= 0) return noop;
    this.inFlight++;
    this.hold();
    const now = this.now();
    if (this.opts.publish && now - this.lastPublished >= this.opts.yieldMs / 2) {
      this.lastPublished = now;
      this.opts.publish().catch(noop);
    }
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight--;
      this.check();
    };
  }

  /** What the process's LISTEN connection calls on INTERACTIVE_CHANNEL: a send began elsewhere. */
  readonly listener: TopicListener = {
    notify: () => {
      if (this.opts.yieldMs > 0) this.hold();
    },
  };

  /**
   * Resolves once the gate is open, or after `maxWaitMs`: what background work awaits before
   * each step.
   */
  async pass(): Promise<void> {
    if (!this.closed) return;
    const deadline = this.now() + this.maxWaitMs;
    while (this.closed) {
      const left = deadline - this.now();
      if (left <= 0) break;
      let timeout: NodeJS.Timeout | undefined;
      await Promise.race([
        this.opened(),
        new Promise<void>((resolve) => (timeout = setTimeout(resolve, left))),
      ]);
      clearTimeout(timeout);
    }
  }

  /** Stops the timer that would open the gate (the process is stopping). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.opening?.resolve();
    this.opening = null;
  }

  private hold(): void {
    this.heldUntil = Math.max(this.heldUntil, this.now() + this.opts.yieldMs);
    this.check();
  }

  private opened(): Promise<void> {
    if (!this.opening) {
      let resolve: () => void = noop;
      const promise = new Promise<void>((r) => (resolve = r));
      this.opening = { promise, resolve };
      this.check();
    }
    return this.opening?.promise ?? Promise.resolve();
  }

  /** Opens the gate for the passes waiting once it is open; else looks again when a hold ends. */
  private check(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!this.opening) return;
    if (!this.closed) {
      this.opening.resolve();
      this.opening = null;
      return;
    }
    // While sends are in flight here, their ends look again; a hold alone ends by the clock.
    if (this.inFlight === 0) {
      this.timer = setTimeout(() => this.check(), Math.max(0, this.heldUntil - this.now()) + 1);
      this.timer.unref?.();
    }
  }
}
