import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Harness settings, read once from the environment and validated (a bad value stops the run). */
export interface Settings {
  /** Seconds per measured run (BENCH_DURATION, default 10). */
  durationS: number;
  /** Seconds of warm-up before a target's measured runs (BENCH_WARMUP, default 3). */
  warmupS: number;
  /** Concurrent connections (BENCH_CONNECTIONS, default 20). */
  connections: number;
  /** Measured runs per target; the median of each figure is reported (BENCH_RUNS, default 3). */
  runs: number;
  /** External PostgreSQL for the service (BENCH_DATABASE_URL); embedded in a temp dir when null. */
  databaseUrl: string | null;
  /** messages suite: contacts the sends cycle through (BENCH_MESSAGES_CONTACTS, default 1,000). */
  messagesContacts: number;
  /** messages suite: messages in the conversation that is read (BENCH_CONVERSATION_MESSAGES, 1,000). */
  conversationMessages: number;
  /** webhooks suite: events queued at once for the throughput figure (BENCH_WEBHOOK_EVENTS, 20,000). */
  webhookEvents: number;
  /** webhooks suite: contacts created per second for the latency figure (BENCH_WEBHOOK_RATE, 500). */
  webhookRate: number;
  /** webhooks suite: seconds the paced creation lasts (BENCH_WEBHOOK_SECONDS, 20). */
  webhookSeconds: number;
  /** broadcasts suite: contacts in the audience (BENCH_BROADCAST_CONTACTS, 100,000). */
  broadcastContacts: number;
  /** broadcasts suite: connections reading contacts during the fan-out (BENCH_BROADCAST_READ_CONNECTIONS, 10). */
  broadcastReadConnections: number;
  /** broadcasts suite: cap on those reads per second, 0 for none (BENCH_BROADCAST_READ_RATE, 0). */
  broadcastReadRate: number;
  /** search suite: contacts in the searched account (BENCH_SEARCH_CONTACTS, 1,000,000). */
  searchContacts: number;
  /**
   * whatsapp-send suite: connections of its second measurement, enough to keep the machine busy
   * (BENCH_SEND_CONNECTIONS, 50); the first uses BENCH_CONNECTIONS.
   */
  sendConnections: number;
  /** whatsapp-broadcast suite: recipients of the broadcast (BENCH_WHATSAPP_CONTACTS, 100,000). */
  whatsappContacts: number;
  /** whatsapp-inbound suite: messages Meta posts (BENCH_INBOUND_MESSAGES, 10,000). */
  inboundMessages: number;
  /** whatsapp-inbound suite: distinct senders, unknown until they write (BENCH_INBOUND_SENDERS, 1,000). */
  inboundSenders: number;
  /** whatsapp-inbound suite: messages in one webhook (BENCH_INBOUND_PER_WEBHOOK, 1). */
  inboundPerWebhook: number;
  /** whatsapp-inbound suite: webhook POSTs in flight at once (BENCH_INBOUND_CONNECTIONS, 20). */
  inboundConnections: number;
  /** streams suite: widget streams held open at once (BENCH_STREAMS, 5,000). */
  streams: number;
  /** streams suite: replies sent per second while they are open (BENCH_STREAMS_RATE, 200). */
  streamsRate: number;
  /** streams suite: seconds each round of replies lasts (BENCH_STREAMS_SECONDS, 10). */
  streamsSeconds: number;
  /** inbox suite: concurrent connections of its measurements (BENCH_INBOX_CONNECTIONS, 4). */
  inboxConnections: number;
  /** inbox-live suite: agents signed in, each with the event stream open (BENCH_LIVE_AGENTS, 50). */
  liveAgents: number;
  /** inbox-live suite: inbound messages per second (BENCH_LIVE_RATE, 50). */
  liveRate: number;
  /** inbox-live suite: seconds each round of inbound messages lasts (BENCH_LIVE_SECONDS, 20). */
  liveSeconds: number;
  /**
   * broadcast-million suite: worker processes (`switchboard worker`) beside an API-only service
   * (`serve --no-workers`); 0 runs the workers inside the service (BENCH_BROADCAST_WORKERS, 0).
   */
  broadcastWorkers: number;
  /**
   * broadcast-million suite: the tag of the big account's contacts the broadcast goes to
   * (BENCH_BROADCAST_TAG): `subscribers` (all 1,000,000) by default, e.g. `tag-05` for a
   * smaller audience while iterating.
   */
  broadcastTag: string;
  /**
   * broadcast-million suite: how long the other account's sends are timed alone before the
   * broadcast (BENCH_BASELINE_SECONDS, 60): at 20 sends a second, 1,200 sends, whose p99 is the
   * 12th slowest (20 s gave 400, and a p99 that moved from 14 to 20 ms between runs).
   */
  broadcastBaselineS: number;
  /**
   * broadcast-million suite: sample what the database's sessions wait on, before and during the
   * broadcast, with the WAL and checkpoint counters' change (BENCH_PG_WAITS=1; off by default,
   * as the sampling itself takes a little of the database).
   */
  pgWaits: boolean;
  /** Another checkout whose built service runs instead of this one's (BENCH_SERVICE_ROOT). */
  serviceRoot: string | null;
  /** webhooks and broadcasts suites: bound on waiting for deliveries / the fan-out (BENCH_WAIT_TIMEOUT, s, 900). */
  waitTimeoutS: number;
}

export class SettingsError extends Error {}

/**
 * The service's SECRETS_KEY on a database of its own (BENCH_DATABASE_URL), where it is required:
 * SECRETS_KEY from the environment, else the harness's own, the same in every run, so that a
 * seeded database's secrets stay readable from one run to the next.
 */
export function benchSecretsKey(env: Record<string, string | undefined> = process.env): string {
  return env.SECRETS_KEY || createHash('sha256').update('switchboard bench').digest('base64');
}

type Env = Record<string, string | undefined>;

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new SettingsError(`${name} must be a whole number from ${min} to ${max} (got "${raw}")`);
  }
  return Number(raw);
}

export function loadSettings(env: Env = process.env): Settings {
  const databaseUrl = env.BENCH_DATABASE_URL || null;
  if (databaseUrl !== null) {
    let protocol: string;
    try {
      protocol = new URL(databaseUrl).protocol;
    } catch {
      throw new SettingsError('BENCH_DATABASE_URL is not a valid URL');
    }
    if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
      throw new SettingsError('BENCH_DATABASE_URL must start with postgres:// or postgresql://');
    }
  }
  return {
    durationS: readInt(env, 'BENCH_DURATION', 10, 1, 600),
    warmupS: readInt(env, 'BENCH_WARMUP', 3, 0, 600),
    connections: readInt(env, 'BENCH_CONNECTIONS', 20, 1, 1000),
    runs: readInt(env, 'BENCH_RUNS', 3, 1, 15),
    databaseUrl,
    messagesContacts: readInt(env, 'BENCH_MESSAGES_CONTACTS', 1_000, 1, 100_000),
    conversationMessages: readInt(env, 'BENCH_CONVERSATION_MESSAGES', 1_000, 1, 100_000),
    webhookEvents: readInt(env, 'BENCH_WEBHOOK_EVENTS', 20_000, 1, 1_000_000),
    webhookRate: readInt(env, 'BENCH_WEBHOOK_RATE', 500, 1, 10_000),
    webhookSeconds: readInt(env, 'BENCH_WEBHOOK_SECONDS', 20, 1, 600),
    broadcastContacts: readInt(env, 'BENCH_BROADCAST_CONTACTS', 100_000, 1, 5_000_000),
    broadcastReadConnections: readInt(env, 'BENCH_BROADCAST_READ_CONNECTIONS', 10, 1, 1000),
    broadcastReadRate: readInt(env, 'BENCH_BROADCAST_READ_RATE', 0, 0, 1_000_000),
    broadcastWorkers: readInt(env, 'BENCH_BROADCAST_WORKERS', 0, 0, 8),
    broadcastTag: env.BENCH_BROADCAST_TAG || 'subscribers',
    broadcastBaselineS: readInt(env, 'BENCH_BASELINE_SECONDS', 60, 5, 600),
    pgWaits: readInt(env, 'BENCH_PG_WAITS', 0, 0, 1) === 1,
    searchContacts: readInt(env, 'BENCH_SEARCH_CONTACTS', 1_000_000, 1, 10_000_000),
    waitTimeoutS: readInt(env, 'BENCH_WAIT_TIMEOUT', 900, 10, 7200),
    whatsappContacts: readInt(env, 'BENCH_WHATSAPP_CONTACTS', 100_000, 1, 5_000_000),
    inboundMessages: readInt(env, 'BENCH_INBOUND_MESSAGES', 10_000, 1, 1_000_000),
    inboundSenders: readInt(env, 'BENCH_INBOUND_SENDERS', 1_000, 1, 1_000_000),
    inboundPerWebhook: readInt(env, 'BENCH_INBOUND_PER_WEBHOOK', 1, 1, 1_000),
    inboundConnections: readInt(env, 'BENCH_INBOUND_CONNECTIONS', 20, 1, 1000),
    sendConnections: readInt(env, 'BENCH_SEND_CONNECTIONS', 50, 1, 1000),
    streams: readInt(env, 'BENCH_STREAMS', 5_000, 1, 20_000),
    streamsRate: readInt(env, 'BENCH_STREAMS_RATE', 200, 1, 10_000),
    streamsSeconds: readInt(env, 'BENCH_STREAMS_SECONDS', 10, 1, 600),
    inboxConnections: readInt(env, 'BENCH_INBOX_CONNECTIONS', 4, 1, 1000),
    liveAgents: readInt(env, 'BENCH_LIVE_AGENTS', 50, 1, 500),
    liveRate: readInt(env, 'BENCH_LIVE_RATE', 50, 1, 10_000),
    liveSeconds: readInt(env, 'BENCH_LIVE_SECONDS', 20, 1, 600),
    serviceRoot: readServiceRoot(env),
  };
}

function readServiceRoot(env: Env): string | null {
  const raw = env.BENCH_SERVICE_ROOT;
  if (raw === undefined || raw === '') return null;
  const root = path.resolve(raw);
  if (!existsSync(path.join(root, 'dist', 'main.js'))) {
    throw new SettingsError(`BENCH_SERVICE_ROOT: ${root}/dist/main.js not found (build it first)`);
  }
  return root;
}

/** The URL without its password, for printing. */
export function redactUrl(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}
