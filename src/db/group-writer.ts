/**
 * Group commit for bookkeeping writes: items added while a write is in flight are written
 * together by the next one, so a burst of N items costs a few round trips instead of N, and a
 * lone item is written at once. Each `add` settles when its own item's write does.
 */
export class GroupWriter<T> {
  private queue: Array<{ item: T; resolve: () => void; reject: (err: unknown) => void }> = [];
  private writing = false;

  constructor(
    private readonly write: (items: T[]) => Promise<void>,
    private readonly maxBatch = 500,
  ) {}

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.writing) void this.writeAll();
    });
  }

  private async writeAll(): Promise<void> {
    this.writing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          await this.write(batch.map((entry) => entry.item));
          for (const entry of batch) entry.resolve();
        } catch (err) {
          for (const entry of batch) entry.reject(err);
        }
      }
    } finally {
      this.writing = false;
    }
  }
}
