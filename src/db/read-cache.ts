/**
 * An in-process cache of rows the API reads on every request (API-key owners, contacts by id),
 * kept correct by invalidation rather than by expiry: the writing process invalidates after its
 * commit, and every process hears of other processes' writes through `CacheFeed` (PostgreSQL
 * LISTEN/NOTIFY, sent by triggers). While the feed is down the cache is disabled, so a missed
 * notification can never leave a stale entry behind; the TTL only bounds what nothing announces.
 *
 * A load that was in flight when any invalidation happened is returned but not kept, so a read
 * that raced a write cannot store the value from before it. Values are shared between callers
 * and must not be mutated.
 */
export class ReadCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  private generation = 0;
  private enabled = false;

  constructor(private readonly opts: { maxEntries: number; ttlMs: number; now?: () => number }) {}

  get isEnabled(): boolean {
    return this.enabled;
  }

  /** The cached value, or `load()`'s (kept when found, current and the cache is enabled). */
  async get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const now = this.opts.now ?? Date.now;
    if (this.enabled) {
      const hit = this.entries.get(key);
      if (hit && hit.expiresAt > now()) return hit.value;
      if (hit) this.entries.delete(key);
    }
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && this.enabled && generation === this.generation) {
      this.entries.set(key, { value, expiresAt: now() + this.opts.ttlMs });
      if (this.entries.size > this.opts.maxEntries) {
        // The oldest insertion goes first.
        const oldest = this.entries.keys().next();
        if (!oldest.done) this.entries.delete(oldest.value);
      }
    }
    return value;
  }

  invalidate(key: string): void {
    this.generation++;
    this.entries.delete(key);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }

  /** Off: every read goes to the database. Either way the cache starts empty. */
  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.clear();
  }
}
