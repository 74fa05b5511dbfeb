import { setMaxListeners } from 'node:events';

/**
 * Abort signals meaning "at most `ms` from now", shared by the calls that start within the same
 * `grainMs`: each call's deadline is between `ms` and `ms + grainMs` away. A process making
 * thousands of calls a second keeps a few dozen timers instead of one per call: an
 * `AbortSignal.timeout` per call keeps its timer and signal alive for the whole `ms` (20 s for
 * Graph), long enough to be copied into V8's old generation and collected there in long pauses.
 */
export class DeadlineSignals {
  /** By deadline (ms since the epoch), in the order they were made: soonest first. */
  private readonly byDeadline = new Map<number, AbortSignal>();

  constructor(
    private readonly ms: number,
    private readonly grainMs = 1_000,
  ) {}

  signal(now: number = Date.now()): AbortSignal {
    const deadline = Math.ceil((now + this.ms) / this.grainMs) * this.grainMs;
    const shared = this.byDeadline.get(deadline);
    if (shared) return shared;
    for (const at of this.byDeadline.keys()) {
      if (at > now) break;
      this.byDeadline.delete(at);
    }
    const signal = AbortSignal.timeout(deadline - now);
    // Every call of the slice listens to it while in flight; that is no leak.
    setMaxListeners(0, signal);
    this.byDeadline.set(deadline, signal);
    return signal;
  }
}
