/**
 * Groups concurrent calls into one round trip: calls made while `maxConcurrent` batches are in
 * flight are run together by the next one, so a burst of N calls costs a few statements instead
 * of N, while a lone call is run at once (no added latency when idle). Each `submit` settles
 * with its own item's result: the batch function returns results aligned with its input.
 *
 * Used for bookkeeping writes (group commit) and for the per-request lookups of the API (key
 * owner, resource by id), whose round trip, not the query itself, is the main cost.
 *
 * A group shares a statement, never a fate: when a batch fails, each of its items is run again
 * alone, so one caller's bad input (or a lost deadlock) fails that caller only.
 */
export type Settled<O> = { ok: O } | { error: unknown };

/**
 * Runs items as one group and, when the group fails, each item again alone: one item's bad
 * input (or a lost deadlock) fails that item only. `run` returns results aligned with its input.
 */
export async function runIsolated<I, O>(
  run: (items: I[]) => Promise<readonly O[]>,
  items: I[],
): Promise<Settled<O>[]> {
  try {
    const results = await run(items);
    return items.map((_, i) => ({ ok: results[i] as O }));
  } catch (error) {
    if (items.length === 1) return [{ error }];
    return Promise.all(
      items.map(async (item): Promise<Settled<O>> => {
        try {
          const [ok] = await run([item]);
          return { ok: ok as O };
        } catch (error) {
          return { error };
        }
      }),
    );
  }
}

/** A group's items by key (their account, mostly), each list in the group's order. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

export class Batcher<I, O> {
  private queue: Array<{ item: I; resolve: (out: O) => void; reject: (err: unknown) => void }> = [];
  private running = 0;
  private readonly maxBatch: number;
  private readonly maxConcurrent: number;

  constructor(
    private readonly run: (items: I[]) => Promise<readonly O[]>,
    opts: { maxBatch?: number; maxConcurrent?: number } = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 500;
    this.maxConcurrent = opts.maxConcurrent ?? 1;
  }

  submit(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.running < this.maxConcurrent) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running++;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        const settled = await runIsolated(
          this.run,
          batch.map((entry) => entry.item),
        );
        batch.forEach((entry, i) => {
          const result = settled[i]!;
          if ('ok' in result) entry.resolve(result.ok);
          else entry.reject(result.error);
        });
      }
    } finally {
      this.running--;
    }
  }
}
