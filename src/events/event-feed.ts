import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { close } from '../db/cache-feed.js';

/** The channel migration 011's trigger notifies on, with the account id as payload. */
export const EVENTS_CHANNEL = 'switchboard_events';
const RETRY_MS = 1_000;
const HEARTBEAT_MS = 5_000;
/** While not listening, every subscriber is woken this often, so nothing waits for long. */
const POLL_MS = 1_000;

interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface EventFeedOptions {
  /** The database to listen on; null polls only (a pooler in transaction mode, tools). */
  url: string | null;
  log: Log;
  pollMs?: number;
  retryMs?: number;
  heartbeatMs?: number;
}

/**
 * Tells this process's open streams that their account has new committed events, whichever
 * process wrote them: one dedicated connection LISTENs on `switchboard_events` (notified by the
 * events table's trigger at commit) and wakes the subscribers of the account named. A wake-up
 * carries no event: the subscriber reads what is new itself, so a lost or doubled wake-up costs
 * at most a read. Whenever the connection is not listening (not yet, lost, or a pooler that
 * swallows notifications) every subscriber is woken every `pollMs` instead, and once more when
 * listening resumes, so nothing committed meanwhile waits.
 *
 * The connection is opened by the first subscription, so a process that never streams holds
 * none. The account's event stream uses it, and the webchat widget's realtime endpoints are
 * meant to (`subscribe(accountId, onWake)`).
 */
export class EventFeed {
  private readonly subscribers = new Map<string, Set<() => void>>();
  private count = 0;
  private client: pg.Client | null = null;
  private connecting = false;
  private started = false;
  private stopped = false;
  private retry: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private poll: NodeJS.Timeout | null = null;
  private readonly pings = new Map<string, () => void>();

  constructor(private readonly opts: EventFeedOptions) {}

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
    this.ensureStarted();
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
    return this.client !== null;
  }

  /** The listening connection's backend pid (tests), or null while not listening. */
  get listenerPid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  /** Closes the connection and ends polling; subscribers are not told (their owners close them). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.stopPolling();
    const client = this.client;
    this.client = null;
    if (client) await close(client);
  }

  private ensureStarted(): void {
    if (!this.listening) this.startPolling();
    if (this.started) return;
    this.started = true;
    if (this.opts.url) void this.connect(this.opts.url);
  }

  private async connect(url: string): Promise<void> {
    if (this.connecting || this.stopped) return;
    this.connecting = true;
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
    });
    client.on('notification', (msg) => this.onNotification(msg.payload ?? ''));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      // Behind a pooler in transaction mode LISTEN succeeds and nothing ever arrives: only a
      // notification that made the round trip proves the feed works.
      await this.ping(client);
    } catch (err) {
      client.removeAllListeners('end');
      await close(client);
      this.connecting = false;
      this.opts.log.warn({ err }, 'event streams polling: cannot listen for events; retrying');
      this.scheduleRetry(url);
      return;
    }
    this.connecting = false;
    if (this.stopped) {
      await close(client);
      return;
    }
    this.client = client;
    this.stopPolling();
    this.startHeartbeat(client, url);
    // Whatever was committed while not listening is read now.
    this.wakeAll();
  }

  private startHeartbeat(client: pg.Client, url: string): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      if (this.client === client)
        this.ping(client).catch((err: Error) => this.lost(client, err, url));
    }, this.opts.heartbeatMs ?? HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** Resolves when a notification sent on this connection has come back on it. */
  private ping(client: pg.Client): Promise<void> {
    const nonce = `ping ${randomUUID()}`;
    const within = this.opts.heartbeatMs ?? HEARTBEAT_MS;
    return new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(() => {
        this.pings.delete(nonce);
        reject(new Error(`a notification did not come back within ${within} ms`));
      }, within);
      deadline.unref();
      this.pings.set(nonce, () => {
        clearTimeout(deadline);
        this.pings.delete(nonce);
        resolve();
      });
      client.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, nonce]).catch((err: Error) => {
        clearTimeout(deadline);
        this.pings.delete(nonce);
        reject(err);
      });
    });
  }

  private lost(client: pg.Client, err?: Error, url = this.opts.url): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    if (this.stopped) return;
    this.opts.log.warn({ err }, 'event streams polling: the event feed was lost; reconnecting');
    if (this.count > 0) this.startPolling();
    void close(client);
    if (url) this.scheduleRetry(url);
  }

  private scheduleRetry(url: string): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.connect(url);
    }, this.opts.retryMs ?? RETRY_MS);
    this.retry.unref();
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

  private onNotification(payload: string): void {
    if (payload.startsWith('ping ')) {
      this.pings.get(payload)?.();
      return;
    }
    const set = this.subscribers.get(payload);
    if (set) for (const wake of [...set]) wake();
  }
}
