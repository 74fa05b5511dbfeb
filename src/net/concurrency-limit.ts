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

/**
 * A ConcurrencyLimit shared fairly among keys (accounts): each key runs at most `perKey` tasks
 * at once, with `perKeyWaiting` more waiting for its share, before it takes a slot of the whole;
 * so one key that floods the limit fills its own share and queue, and is refused beyond them,
 * while the others keep the rest of the slots.
 */
export class FairConcurrencyLimit {
  private readonly shares = new Map<string, ConcurrencyLimit>();

  constructor(
    private readonly total: ConcurrencyLimit,
    readonly perKey: number,
    readonly perKeyWaiting: number,
  ) {}

  /** Keys with a task running or waiting (their shares are dropped when idle). */
  get keys(): number {
    return this.shares.size;
  }

  async run<T>(key: string, task: () => Promise<T>, refuse: () => Error): Promise<T> {
    let share = this.shares.get(key);
    if (!share) {
      share = new ConcurrencyLimit(this.perKey, this.perKeyWaiting);
      this.shares.set(key, share);
    }
    try {
      return await share.run(() => this.total.run(task, refuse), refuse);
    } finally {
      if (share.running === 0 && share.queued === 0) this.shares.delete(key);
    }
  }
}
