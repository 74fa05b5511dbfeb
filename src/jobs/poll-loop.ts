/** A streak of failures is reported at its first and then at every this many. */
export const REPORT_FAILURES_EVERY = 20;

/**
 * The loop of a worker that claims work from the database: run a step; when it found nothing
 * to do (or has no free slot), sleep for the poll interval, unless a slot freed meanwhile.
 * The signal is sticky, so a slot freed while a step is running is never lost to the sleep.
 * A failing step (the database is down) never ends the loop: it is reported and retried after a
 * delay that doubles with each consecutive failure, up to `maxBackoffMs`, so an outage is not
 * met with a storm of attempts and log lines, and the loop picks up again by itself after it.
 */
export class PollLoop {
  private running = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private signalled = false;
  private failures = 0;

  constructor(
    /** Returns true when it should run again at once (it claimed work and has room for more). */
    private readonly step: () => Promise<boolean>,
    private readonly intervalMs: number,
    /**
     * Told a failure and how many in a row it makes: the first of a streak and every
     * REPORT_FAILURES_EVERY-th, so that an outage is logged now and then, not at every poll.
     */
    private readonly onError: (err: unknown, consecutive: number) => void,
    private readonly maxBackoffMs = 5_000,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops after the current step. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    this.loop = null;
  }

  /** A slot freed (or work arrived): run the next step without waiting for the interval. */
  signal(): void {
    this.signalled = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    while (this.running) {
      this.signalled = false;
      let again = false;
      let waitMs = this.intervalMs;
      try {
        again = await this.step();
        this.failures = 0;
      } catch (err) {
        this.failures++;
        if (this.failures === 1 || this.failures % REPORT_FAILURES_EVERY === 0)
          this.onError(err, this.failures);
        waitMs = Math.max(
          this.intervalMs,
          Math.min(this.maxBackoffMs, this.intervalMs * 2 ** Math.min(this.failures - 1, 20)),
        );
      }
      if (!this.running) continue;
      // After a failure, a signal does not cut the back-off short: it would retry at once.
      if (this.failures === 0 && (again || this.signalled)) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }
}
