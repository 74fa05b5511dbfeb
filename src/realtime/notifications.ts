import { randomUUID } from 'node:crypto';
import pg from 'pg';

const RETRY_MS = 1_000;
/** How often the connection checks itself end to end, and how long a check may take. */
const HEARTBEAT_MS = 5_000;
/** How long `stop` waits for the listening connection to close before cutting it. */
const CLOSE_MS = 1_000;

interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface NotificationsOptions {
  /** The database to listen on; null never listens (a pooler in transaction mode, tools). */
  url: string | null;
  log: Log;
  /** What pg_stat_activity shows for the listening connection (see createDb). */
  applicationName?: string;
  retryMs?: number;
  heartbeatMs?: number;
}

/**
 * What a subscriber hears: a channel's notifications whose payload is `<name> <key>` or
 * `<name>` (the read caches' topics on `switchboard_cache`), or, without a name, every
 * notification of the channel with its payload as the key (`switchboard_events`).
 */
export interface Topic {
  channel: string;
  name?: string;
}

export interface TopicListener {
  /** A notification of the topic: its key, or null when it names the whole topic. */
  notify(key: string | null): void;
  /**
   * Notifications arrive (true) or may be missed (false). True comes again after every
   * reconnection: whatever was notified meanwhile is lost, and the subscriber catches up.
   */
  live?(live: boolean): void;
}

interface Subscription {
  topic: Topic;
  listener: TopicListener;
}

/**
 * The process's one LISTEN connection to PostgreSQL, shared by every consumer of notifications
 * (the read caches, the event feed, the webchat wake-ups), each subscribed to its topics.
 * Notifications are sent by triggers (or `pg_notify`) and delivered when the writing
 * transaction commits, whichever process wrote. It is `live` once a notification has made the
 * round trip on it: behind a pooler in transaction mode LISTEN succeeds and nothing ever arrives.
 * A heartbeat repeats that check every few seconds, so a connection cut without a word (a
 * network partition) is given up rather than trusted; a lost connection is replaced, LISTENs on
 * every channel again, and its subscribers are told (`live(false)`, then `live(true)`).
 */
export class Notifications {
  private readonly subscriptions = new Set<Subscription>();
  /** Each channel's subscriptions: the channels LISTENed on. */
  private readonly channels = new Map<string, Set<Subscription>>();
  /** A channel of this process's own for the heartbeat's round trips. */
  private readonly pingChannel = `switchboard_ping_${randomUUID().replaceAll('-', '')}`;
  private readonly pings = new Map<string, () => void>();
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private retry: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private started = false;
  private stopped = false;

  constructor(private readonly opts: NotificationsOptions) {}

  /** Whether notifications arrive (otherwise subscribers must look for changes themselves). */
  get live(): boolean {
    return this.client !== null;
  }

  /** The listening connection's backend pid (tests), or null while not live. */
  get listenerPid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  /**
   * Calls the listener on the topic's notifications; returns the unsubscribe function. A
   * subscription made while live hears `live(true)` once its channel is listened to.
   */
  subscribe(topic: Topic, listener: TopicListener): () => void {
    const sub: Subscription = { topic, listener };
    this.subscriptions.add(sub);
    let set = this.channels.get(topic.channel);
    if (!set) {
      this.channels.set(topic.channel, (set = new Set()));
      const client = this.client;
      if (client) {
        client
          .query(`LISTEN ${topic.channel}`)
          .then(() => {
            if (this.client === client && this.subscriptions.has(sub)) listener.live?.(true);
          })
          .catch((err: Error) => this.lost(client, err));
      }
    } else if (this.client) listener.live?.(true);
    set.add(sub);
    return () => {
      this.subscriptions.delete(sub);
      set.delete(sub);
    };
  }

  /**
   * Opens the connection (once; later calls wait for the first attempt). Resolves once live,
   * or after the first failed attempt, which is retried in the background.
   */
  async start(): Promise<void> {
    if (this.stopped || !this.opts.url) return;
    if (!this.started) {
      this.started = true;
      this.connecting = this.connect(this.opts.url);
    }
    await this.connecting;
  }

  /** Closes the connection; live subscribers hear `live(false)`. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    const client = this.client;
    this.client = null;
    if (client) {
      this.tell(false);
      await close(client);
    }
  }

  private async connect(url: string): Promise<void> {
    // A connect that hangs (a server that accepts and never answers) must fail and be retried,
    // or the subscribers would never be live again after the database is back.
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
      application_name: this.opts.applicationName,
    });
    client.on('notification', (msg) => this.onNotification(msg.channel, msg.payload ?? ''));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${this.pingChannel}`);
      // Listening is not enough: behind a pooler in transaction mode LISTEN succeeds and no
      // notification ever arrives. The subscribers are live only once one made the round trip.
      await this.ping(client);
      // Every channel subscribed to, those subscribed to meanwhile included.
      const listened = new Set<string>();
      for (let next = this.unlistened(listened); next; next = this.unlistened(listened)) {
        await client.query(`LISTEN ${next}`);
        listened.add(next);
      }
    } catch (err) {
      client.removeAllListeners('end');
      await close(client);
      this.opts.log.warn(
        { err },
        'notifications off (read caches off, streams polling): cannot listen; retrying',
      );
      this.scheduleRetry(url);
      return;
    }
    if (this.stopped) {
      await close(client);
      return;
    }
    this.client = client;
    this.startHeartbeat(client, url);
    this.tell(true);
  }

  /**
   * Every few seconds a notification must make the round trip; a failed check gives the
   * connection up until a new one listens.
   */
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
    const nonce = randomUUID();
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
      client.query('SELECT pg_notify($1, $2)', [this.pingChannel, nonce]).catch((err: Error) => {
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
    this.tell(false);
    this.opts.log.warn(
      { err },
      'notifications off (read caches off, streams polling): the listening connection was lost; reconnecting',
    );
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

  private unlistened(listened: Set<string>): string | undefined {
    for (const channel of this.channels.keys()) if (!listened.has(channel)) return channel;
    return undefined;
  }

  private tell(live: boolean): void {
    for (const sub of [...this.subscriptions]) sub.listener.live?.(live);
  }

  private onNotification(channel: string, payload: string): void {
    if (channel === this.pingChannel) {
      this.pings.get(payload)?.();
      return;
    }
    const set = this.channels.get(channel);
    if (!set) return;
    const space = payload.indexOf(' ');
    const name = space < 0 ? payload : payload.slice(0, space);
    for (const sub of [...set]) {
      const wanted = sub.topic.name;
      if (wanted === undefined) sub.listener.notify(payload);
      else if (wanted === name) sub.listener.notify(space < 0 ? null : payload.slice(space + 1));
    }
  }
}

/** Ends a connection politely, or cuts it when the server does not answer (a frozen backend). */
export async function close(client: pg.Client): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const cut = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      (
        client as unknown as { connection?: { stream?: { destroy(): void } } }
      ).connection?.stream?.destroy();
      resolve();
    }, CLOSE_MS);
    timer.unref();
  });
  await Promise.race([client.end().catch(() => undefined), cut]);
  clearTimeout(timer);
}
