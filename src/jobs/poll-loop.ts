/**
 * The loop of a worker that claims work from the database: run a step; when it found nothing
 * to do (or has no free slot), sleep for the poll interval, unless a slot freed meanwhile.
 * The signal is sticky, so a slot freed while a step is running is never lost to the sleep.
 */
export class PollLoop {
  private running = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private signalled = false;

  constructor(
    /** Returns true when it should run again at once (it claimed work and has room for more). */
    private readonly step: () => Promise<boolean>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
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
      try {
        again = await this.step();
      } catch (err) {
        this.onError(err);
      }
      if (again || !this.running || this.signalled) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.intervalMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }
}
