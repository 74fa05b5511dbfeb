import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { CACHE_CHANNEL, type Invalidatable } from '../db/cache-feed.js';

/** The cache-feed topic of webchat wake-ups: `webchat <account id> <contact id>`. */
export const WEBCHAT_TOPIC = 'webchat';

type Wake = () => void;

/**
 * Wakes the open widget streams of a contact, in every API process: a change (a reply stored,
 * a visitor's message in another tab) is announced with NOTIFY on the cache feed's channel, the
 * feed hands it here (subscribed to WEBCHAT_TOPIC), and each woken stream reads what is new
 * from the database. A wake-up carries no data, so a lost one costs only latency: while the
 * feed is not listening (`live` false) streams poll instead, and when it listens again every
 * stream is woken to catch up.
 */
export class WebchatWakeups implements Invalidatable {
  private readonly listeners = new Map<string, Set<Wake>>();
  private listening = false;

  constructor(private readonly db: Db) {}

  /** Whether wake-ups from other processes arrive (the feed listens). */
  get live(): boolean {
    return this.listening;
  }

  /** Calls `wake` on every change to the contact's webchat conversation; returns the unsubscribe. */
  subscribe(accountId: string, contactId: string, wake: Wake): () => void {
    const key = `${accountId} ${contactId}`;
    let set = this.listeners.get(key);
    if (!set) this.listeners.set(key, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.listeners.get(key) === set) this.listeners.delete(key);
    };
  }

  /** Announces a committed change to every process (this one at once). Never throws. */
  async publish(accountId: string, contactId: string): Promise<void> {
    const key = `${accountId} ${contactId}`;
    this.invalidate(key);
    try {
      await sql`SELECT pg_notify(${CACHE_CHANNEL}, ${`${WEBCHAT_TOPIC} ${key}`})`.execute(this.db);
    } catch {
      // Other processes' streams poll or catch up on reconnection; the message is stored.
    }
  }

  /**
   * The connection topic's listener (`connection <account id> <channel>`, sent by the
   * connections table's trigger on every insert, update and delete, whichever process made it):
   * a change to an account's webchat connection wakes every stream of that account, which then
   * looks its widget up again (a removed origin, a deleted connection, a rotated secret end it).
   */
  readonly connectionChanges: Invalidatable = {
    invalidate: (key) => {
      const [accountId, channel] = key.split(' ');
      if (accountId && channel === 'webchat') this.wakeAccount(accountId);
    },
    clear: () => this.clear(),
    // The webchat topic's own subscription says whether the feed listens.
    setEnabled: () => undefined,
  };

  /** Wakes every stream of the account in this process (its webchat connection changed). */
  wakeAccount(accountId: string): void {
    const prefix = `${accountId} `;
    for (const [key, set] of [...this.listeners])
      if (key.startsWith(prefix)) for (const wake of [...set]) wake();
  }

  /** Number of streams this process holds (metrics, tests). */
  get size(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  invalidate(key: string): void {
    const set = this.listeners.get(key);
    if (set) for (const wake of [...set]) wake();
  }

  clear(): void {
    for (const set of [...this.listeners.values()]) for (const wake of [...set]) wake();
  }

  setEnabled(enabled: boolean): void {
    const was = this.listening;
    this.listening = enabled;
    // Whatever was announced while not listening is read now.
    if (enabled && !was) this.clear();
  }
}
