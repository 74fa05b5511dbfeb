import { Notifications, type NotificationsOptions } from '../realtime/notifications.js';

/** The channel the triggers of migration 006 notify on. */
export const CACHE_CHANNEL = 'switchboard_cache';

/** What the feed does to a cache (ReadCache is one). */
export interface Invalidatable {
  invalidate(key: string): void;
  clear(): void;
  setEnabled(enabled: boolean): void;
}

/**
 * The caches one topic keeps correct: `byKey` drop the announced key; `whole`, keyed otherwise
 * (connections by id, where the topic names account and channel), drop everything they hold on
 * any change of the topic, which is cheap for what seldom changes.
 */
export function topicCaches(byKey: Invalidatable[], whole: Invalidatable[]): Invalidatable {
  const all = [...byKey, ...whole];
  return {
    invalidate: (key) => {
      for (const cache of byKey) cache.invalidate(key);
      for (const cache of whole) cache.clear();
    },
    clear: () => {
      for (const cache of all) cache.clear();
    },
    setEnabled: (enabled) => {
      for (const cache of all) cache.setEnabled(enabled);
    },
  };
}

/**
 * Tells this process's read caches about every committed change to what they hold, whichever
 * process (or psql session) made it: triggers send `NOTIFY switchboard_cache` with
 * `<topic> <key>` (one entry) or `<topic>` (all of the topic's entries), delivered when the
 * writing transaction commits. The process's one listening connection (Notifications) hears
 * them. Until it listens, and whenever it is lost, the caches are disabled; they are
 * re-enabled, empty, once it listens again.
 */
export class CacheFeed {
  private readonly notifications: Notifications;
  /** Whether the connection is this feed's own (another process's feed, in tests), not shared. */
  private readonly owned: boolean;
  private readonly topics = new Map<string, { cache: Invalidatable; unsubscribe: () => void }>();

  /** On the process's notifications, or on a connection of its own. */
  constructor(source: Notifications | (NotificationsOptions & { url: string })) {
    this.owned = !(source instanceof Notifications);
    this.notifications = source instanceof Notifications ? source : new Notifications(source);
  }

  subscribe(topic: string, cache: Invalidatable): void {
    this.topics.get(topic)?.unsubscribe();
    const unsubscribe = this.notifications.subscribe(
      { channel: CACHE_CHANNEL, name: topic },
      {
        notify: (key) => (key === null ? cache.clear() : cache.invalidate(key)),
        live: (live) => cache.setEnabled(live),
      },
    );
    this.topics.set(topic, { cache, unsubscribe });
  }

  /** Resolves once listening, or after the first failed attempt (retried in the background). */
  async start(): Promise<void> {
    await this.notifications.start();
  }

  /** Disables the caches and stops hearing changes (and closes the connection if its own). */
  async stop(): Promise<void> {
    for (const { cache, unsubscribe } of this.topics.values()) {
      unsubscribe();
      cache.setEnabled(false);
    }
    this.topics.clear();
    if (this.owned) await this.notifications.stop();
  }

  /** The listening connection's backend pid (tests), or null while not listening. */
  get listenerPid(): number | null {
    return this.notifications.listenerPid;
  }
}
