import pg from 'pg';

/** The channel the triggers of migration 006 notify on. */
export const CACHE_CHANNEL = 'switchboard_cache';
const RETRY_MS = 1_000;
/** A listening connection that does not answer a query within this long is treated as lost. */
const HEARTBEAT_MS = 5_000;

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
  private stopped = false;

  constructor(private readonly opts: { url: string; log: Log; retryMs?: number; heartbeatMs?: number }) {}

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
    await client?.end().catch(() => undefined);
  }

  /** The listening connection's backend pid (tests), or null while not listening. */
  get listenerPid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.opts.url });
    client.on('notification', (msg) => this.onNotification(msg.payload ?? ''));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CACHE_CHANNEL}`);
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      this.opts.log.warn({ err }, 'read caches off: cannot listen for changes; retrying');
      this.scheduleRetry();
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.setEnabled(true);
    this.startHeartbeat(client);
  }

  /**
   * A connection cut without a word (a network partition) would otherwise look alive for as long
   * as TCP takes to notice, while its notifications are lost: a query that does not come back in
   * time ends it, which disables the caches until a new connection listens.
   */
  private startHeartbeat(client: pg.Client): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    const every = this.opts.heartbeatMs ?? HEARTBEAT_MS;
    this.heartbeat = setInterval(() => {
      if (this.client !== client) return;
      const deadline = setTimeout(() => this.lost(client, new Error(`no answer within ${every} ms`)), every);
      client.query('SELECT 1').then(
        () => clearTimeout(deadline),
        (err: Error) => {
          clearTimeout(deadline);
          this.lost(client, err);
        },
      );
    }, every);
    this.heartbeat.unref();
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.setEnabled(false);
    if (this.stopped) return;
    this.opts.log.warn({ err }, 'read caches off: the change feed connection was lost; reconnecting');
    client.end().catch(() => undefined);
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
    const cache = this.topics.get(topic);
    if (!cache) return;
    if (space < 0) cache.clear();
    else cache.invalidate(payload.slice(space + 1));
  }
}
