import { randomUUID } from 'node:crypto';
import pg from 'pg';

/** The channel the triggers of migration 006 notify on. */
export const CACHE_CHANNEL = 'switchboard_cache';
const RETRY_MS = 1_000;
/** How often the feed checks itself end to end, and how long a check may take. */
const HEARTBEAT_MS = 5_000;
/** How long `stop` waits for the listening connection to close before cutting it. */
const CLOSE_MS = 1_000;

/** What the feed does to a cache (ReadCache is one). */
export interface Invalidatable {
  invalidate(key: string): void;
  clear(): void;
  setEnabled(enabled: boolean): void;
}

interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
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
 * writing transaction commits. One dedicated connection listens. Until it listens, and whenever
 * it is lost, the caches are disabled; they are re-enabled, empty, once it listens again.
 */
export class CacheFeed {
  private readonly topics = new Map<string, Invalidatable>();
  private client: pg.Client | null = null;
  private retry: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly pings = new Map<string, () => void>();
  private stopped = false;

  constructor(
    private readonly opts: { url: string; log: Log; retryMs?: number; heartbeatMs?: number },
  ) {}

  subscribe(topic: string, cache: Invalidatable): void {
    this.topics.set(topic, cache);
  }

  /** Resolves once listening, or after the first failed attempt (retried in the background). */
  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.setEnabled(false);
    const client = this.client;
    this.client = null;
    if (client) await close(client);
  }

  /** The listening connection's backend pid (tests), or null while not listening. */
  get listenerPid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  private async connect(): Promise<void> {
    // A connect that hangs (a server that accepts and never answers) must fail and be retried,
    // or the caches would stay off after the database is back.
    const client = new pg.Client({
      connectionString: this.opts.url,
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
    });
    client.on('notification', (msg) => this.onNotification(msg.payload ?? ''));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CACHE_CHANNEL}`);
      // Listening is not enough: behind a pooler in transaction mode LISTEN succeeds and no
      // notification ever arrives. The caches go on only once one has made the round trip.
      await this.ping(client);
    } catch (err) {
      client.removeAllListeners('end');
      await close(client);
      this.opts.log.warn({ err }, 'read caches off: cannot listen for changes; retrying');
      this.scheduleRetry();
      return;
    }
    if (this.stopped) {
      await close(client);
      return;
    }
    this.client = client;
    this.setEnabled(true);
    this.startHeartbeat(client);
  }

  /**
   * Every few seconds a notification must make the round trip. A connection cut without a word
   * (a network partition) would otherwise look alive for as long as TCP takes to notice, with
   * its notifications lost meanwhile; a failed check disables the caches until a new
   * connection listens.
   */
  private startHeartbeat(client: pg.Client): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      if (this.client === client) this.ping(client).catch((err: Error) => this.lost(client, err));
    }, this.opts.heartbeatMs ?? HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** Sends a notification to this channel and resolves when this connection has heard it. */
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
      client
        .query('SELECT pg_notify($1, $2)', [CACHE_CHANNEL, `ping ${nonce}`])
        .catch((err: Error) => {
          clearTimeout(deadline);
          this.pings.delete(nonce);
          reject(err);
        });
    });
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.setEnabled(false);
    if (this.stopped) return;
    this.opts.log.warn(
      { err },
      'read caches off: the change feed connection was lost; reconnecting',
    );
    void close(client);
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      void this.connect();
    }, this.opts.retryMs ?? RETRY_MS);
    this.retry.unref();
  }

  private setEnabled(enabled: boolean): void {
    for (const cache of this.topics.values()) cache.setEnabled(enabled);
  }

  private onNotification(payload: string): void {
    const space = payload.indexOf(' ');
    const topic = space < 0 ? payload : payload.slice(0, space);
    if (topic === 'ping') {
      this.pings.get(payload.slice(space + 1))?.();
      return;
    }
    const cache = this.topics.get(topic);
    if (!cache) return;
    if (space < 0) cache.clear();
    else cache.invalidate(payload.slice(space + 1));
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
