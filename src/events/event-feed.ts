import type { Notifications } from '../realtime/notifications.js';

/** The channel migration 011's trigger notifies on, with the account id as payload. */
export const EVENTS_CHANNEL = 'switchboard_events';
/** While not listening, every subscriber is woken this often, so nothing waits for long. */
const POLL_MS = 1_000;

export interface EventFeedOptions {
  /** The process's listening connection (which, without a database to listen on, never is). */
  notifications: Notifications;
  pollMs?: number;
}

/**
 * Tells this process's open streams that their account has new committed events, whichever
 * process wrote them: the process's listening connection hears `switchboard_events` (notified
 * by the events table's trigger at commit) and the feed wakes the subscribers of the account
 * named. A wake-up carries no event: the subscriber reads what is new itself, so a lost or
 * doubled wake-up costs at most a read. Whenever the connection is not live (not yet, lost, or
 * a pooler that swallows notifications) every subscriber is woken every `pollMs` instead, and
 * once more when it is live again, so nothing committed meanwhile waits.
 *
 * The connection is opened by the first subscription at the latest, so a process that never
 * streams (and keeps no read caches) holds none.
 */
export class EventFeed {
  private readonly subscribers = new Map<string, Set<() => void>>();
  private count = 0;
  private stopped = false;
  private poll: NodeJS.Timeout | null = null;
  private readonly unlisten: () => void;

  constructor(private readonly opts: EventFeedOptions) {
    this.unlisten = opts.notifications.subscribe(
      { channel: EVENTS_CHANNEL },
      {
        notify: (accountId) => {
          const set = accountId === null ? undefined : this.subscribers.get(accountId);
          if (set) for (const wake of [...set]) wake();
        },
        live: (live) => {
          if (live) {
            this.stopPolling();
            // Whatever was committed while not listening is read now.
            this.wakeAll();
          } else if (this.count > 0) this.startPolling();
        },
      },
    );
  }

  /** Calls `onWake` when the account may have new events; returns the unsubscribe function. */
  subscribe(accountId: string, onWake: () => void): () => void {
    if (this.stopped) throw new Error('the event feed is stopped');
    let set = this.subscribers.get(accountId);
    if (!set) {
      set = new Set();
      this.subscribers.set(accountId, set);
    }
    // A wrapper per subscription, so that one callback subscribed twice is two subscriptions.
    const entry = () => onWake();
    set.add(entry);
    this.count++;
    if (!this.listening) this.startPolling();
    void this.opts.notifications.start();
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      set.delete(entry);
      this.count--;
      if (set.size === 0 && this.subscribers.get(accountId) === set)
        this.subscribers.delete(accountId);
      if (this.count === 0) this.stopPolling();
    };
  }

  /** Open subscriptions (tests check that a closed stream leaves none behind). */
  get subscriptions(): number {
    return this.count;
  }

  /** Whether wake-ups come from notifications (otherwise from polling). */
  get listening(): boolean {
    return this.opts.notifications.live;
  }

  /** The listening connection's backend pid (tests), or null while not listening. */
  get listenerPid(): number | null {
    return this.opts.notifications.listenerPid;
  }

  /** Ends polling and wake-ups; subscribers are not told (their owners close them). */
  stop(): void {
    this.stopped = true;
    this.unlisten();
    this.stopPolling();
  }

  private startPolling(): void {
    if (this.poll || this.stopped) return;
    this.poll = setInterval(() => this.wakeAll(), this.opts.pollMs ?? POLL_MS);
    this.poll.unref();
  }

  private stopPolling(): void {
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) for (const wake of [...set]) wake();
  }
}
