/**
 * At most `max` tasks at once; up to `maxWaiting` more wait their turn in arrival order, and
 * anything beyond is refused at once (`run` returns the refusal's value from `refuse`), so that
 * neither the tasks in flight nor the queue grow without bound however many requests arrive.
 */
export class ConcurrencyLimit {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    readonly max: number,
    readonly maxWaiting: number,
  ) {}

  get running(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Runs `task` when a slot is free; throws what `refuse` returns when the queue is full too. */
  async run<T>(task: () => Promise<T>, refuse: () => Error): Promise<T> {
    if (this.active >= this.max) {
      if (this.waiting.length >= this.maxWaiting) throw refuse();
      // The slot is handed over by the task that frees it (active stays counted), so a newcomer
      // can never overtake a waiting task.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
