import type { Readable } from 'node:stream';
import { decodeTime } from 'ulid';
import type { Clock } from '../clock.js';
import type { Scope } from '../db/transactor.js';
import { AppError, ValidationError } from '../errors.js';
import { OpenStreams } from '../realtime/sse.js';
import type { EventFeed } from './event-feed.js';
import { EventStream } from './event-stream.js';
import { STREAM_EVENT_TYPES } from './event-types.js';
import type { EventsRepository, StreamPosition } from './events.repository.js';
import type { Presence } from './presence.js';
import { SharedEventReads } from './shared-reads.js';
import { EVENT_RETENTION_MS } from './retention.js';

const KEEP_ALIVE_MS = 15_000;
/** Open streams of one account in one process. */
const MAX_PER_ACCOUNT = 500;
/** Open streams in one process, all accounts together (each holds a socket and a small buffer). */
const MAX_PER_PROCESS = 10_000;
const POLL_MS = 1_000;
const EVENT_ID = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;
/**
 * A stream's starting place as its opening `id:` carries it: `pos_<transaction id>_<seq>` (an
 * xid8, checked against now(); a seq within bigint).
 */
const POSITION_ID = /^pos_(\d{1,20})_(\d{1,18})$/;

/** The `id:` that stands for a place in the stream before any event was sent from it. */
export function positionId(p: StreamPosition): string {
  return `pos_${p.xid}_${p.seq}`;
}

/** What a stream was opened with: an API key (by id) or a session (by its token's hash). */
export interface StreamCredential {
  kind: 'key' | 'session';
  id: string;
}

/**
 * Which of these credentials no longer hold, each with the reason its streams end: a revoked
 * key, a plan without API access, a session that ended.
 */
export type CredentialCheck = (credentials: StreamCredential[]) => Promise<Map<string, string>>;

export interface EventStreamLimits {
  /** How often an idle stream gets a `: keep-alive` comment. */
  keepAliveMs?: number;
  maxPerAccount?: number;
  maxPerProcess?: number;
  /** Streams end after this long (the client reconnects with Last-Event-ID); 0 never. */
  maxLifetimeMs?: number;
  /** How long after a failed read a stream reads again. */
  pollMs?: number;
  /** How often the credentials of open streams are checked again. */
  credentialCheckMs?: number;
}

/** Streams end after a day (clients reconnect with Last-Event-ID), so none outlives its credential's checks for long. */
const MAX_LIFETIME_MS = 24 * 60 * 60 * 1000;
const CREDENTIAL_CHECK_MS = 30_000;

/** The per-account (or per-process) cap on open streams is reached. */
export class TooManyStreams extends AppError {
  constructor(message: string, status: 429 | 503) {
    super(status === 429 ? 'rate_limited' : 'unavailable', message);
  }
}

/**
 * The account's live event stream (`GET /v1/events/stream`): checks what the client asked
 * for, finds where it resumes, and keeps the process's open streams (capped, kept alive, all
 * ended at shutdown).
 */
export class EventStreamService {
  private readonly open = new OpenStreams<EventStream>();
  private readonly credentialOf = new Map<EventStream, StreamCredential>();
  private ticker: NodeJS.Timeout | null = null;
  private checker: NodeJS.Timeout | null = null;
  private readonly limits: Required<EventStreamLimits>;
  private readonly reads: SharedEventReads;

  constructor(
    private readonly deps: {
      events: EventsRepository;
      feed: EventFeed;
      clock: Clock;
      log: { warn(obj: object, msg: string): void };
      limits?: EventStreamLimits;
      presence?: Presence;
      /** Checks the open streams' credentials again; without it they last their lifetime. */
      credentials?: CredentialCheck;
    },
  ) {
    this.limits = {
      keepAliveMs: KEEP_ALIVE_MS,
      maxPerAccount: MAX_PER_ACCOUNT,
      maxPerProcess: MAX_PER_PROCESS,
      maxLifetimeMs: MAX_LIFETIME_MS,
      pollMs: POLL_MS,
      credentialCheckMs: CREDENTIAL_CHECK_MS,
      ...deps.limits,
    };
    this.reads = new SharedEventReads(deps.events);
  }

  /** Streams open in this process (tests check that a closed one is gone). */
  get openStreams(): number {
    return this.open.size;
  }

  /**
   * Opens a stream of the account's events of `types` (a comma-separated list; all when
   * absent) after the event `lastEventId`, or from now on. Refuses before anything is streamed:
   * an unknown type or event id (422), too many open streams (429 for the account, 503 for the
   * process).
   */
  async openStream(
    scope: Scope,
    query: { types?: string; lastEventId?: string },
    credential?: StreamCredential,
  ): Promise<Readable> {
    const { types, from } = await this.check(scope, query);
    const stream: EventStream = new EventStream({
      accountId: scope.accountId,
      types,
      from,
      // A stream that starts from now says where (a resumed one: the client knows already).
      startId: query.lastEventId ? undefined : positionId(from),
      reads: this.reads,
      feed: this.deps.feed,
      log: this.deps.log,
      pollMs: this.limits.pollMs,
      lifetimeMs: this.limits.maxLifetimeMs,
      presence: this.deps.presence,
      onClosed: () => {
        this.open.remove(stream);
        this.credentialOf.delete(stream);
        if (this.open.size === 0) this.stopTicker();
      },
    });
    this.open.add(stream, [scope.accountId]);
    if (credential) this.credentialOf.set(stream, credential);
    this.startTicker();
    return stream.output;
  }

  /**
   * What opening a stream would answer, without opening one (`HEAD`): the same refusals (422,
   * 429, 503), or where the stream would start.
   */
  async check(
    scope: Scope,
    query: { types?: string; lastEventId?: string },
  ): Promise<{ types: readonly string[] | null; from: StreamPosition }> {
    const types = parseTypes(query.types);
    const from = await this.resume(scope.accountId, query.lastEventId);
    this.open.refuseWhileClosing();
    if (this.open.size >= this.limits.maxPerProcess) {
      throw new TooManyStreams(
        `this server holds ${this.limits.maxPerProcess} event streams, its most; retry shortly`,
        503,
      );
    }
    if (this.open.count(scope.accountId) >= this.limits.maxPerAccount) {
      throw new TooManyStreams(
        `the account has ${this.limits.maxPerAccount} event streams open on this server, the most allowed; close one first`,
        429,
      );
    }
    return { types, from };
  }

  /** Ends every open stream and refuses new ones (server shutdown). */
  closeAll(): void {
    this.open.closeAll();
    this.stopTicker();
  }

  /**
   * Where a stream resumes. After a known event: right after it. After an id too old to be
   * kept (its time, which a ULID carries, is beyond the 7 days of retention): from the oldest
   * event kept, everything that can still be had. From a stream's opening `id:` (a client
   * dropped before any event came): where that stream started. Any other id (malformed,
   * unknown, another account's, a place the stream has not reached): 422, since resuming from a
   * guess would silently skip or repeat events.
   */
  private async resume(accountId: string, lastEventId?: string): Promise<StreamPosition> {
    if (lastEventId === undefined || lastEventId === '') return this.deps.events.now();
    const place = POSITION_ID.exec(lastEventId);
    if (place) {
      const from = { xid: place[1]!, seq: place[2]! };
      // Places are handed out from now(), which never goes back: one ahead of it was not.
      if (BigInt(from.xid) <= BigInt((await this.deps.events.now()).xid)) return from;
    }
    const position = EVENT_ID.test(lastEventId)
      ? await this.deps.events.position(accountId, lastEventId)
      : null;
    if (position) return position;
    if (
      EVENT_ID.test(lastEventId) &&
      idTime(lastEventId) < this.deps.clock.now().getTime() - EVENT_RETENTION_MS
    ) {
      return { xid: '0', seq: '0' };
    }
    throw new ValidationError(
      'Last-Event-ID',
      `no event ${lastEventId} of this account is kept; reconnect without it to follow from now`,
    );
  }

  private startTicker(): void {
    if (this.ticker) return;
    this.ticker = setInterval(() => {
      for (const stream of this.open.streams()) stream.keepAlive();
    }, this.limits.keepAliveMs);
    this.ticker.unref();
    if (this.deps.credentials) {
      this.checker = setInterval(() => void this.checkCredentials(), this.limits.credentialCheckMs);
      this.checker.unref();
    }
  }

  private stopTicker(): void {
    if (this.ticker) clearInterval(this.ticker);
    if (this.checker) clearInterval(this.checker);
    this.ticker = null;
    this.checker = null;
  }

  /**
   * Ends, with `event: end`, the streams whose credential no longer holds: one check for all
   * the open streams of the process. A failed check ends nothing (the next one tries again).
   */
  async checkCredentials(): Promise<void> {
    const check = this.deps.credentials;
    if (!check || this.credentialOf.size === 0) return;
    const unique = new Map<string, StreamCredential>();
    for (const c of this.credentialOf.values()) unique.set(`${c.kind} ${c.id}`, c);
    let ended: Map<string, string>;
    try {
      ended = await check([...unique.values()]);
    } catch (err) {
      this.deps.log.warn({ err }, "checking the event streams' credentials failed");
      return;
    }
    for (const [stream, credential] of [...this.credentialOf])
      if (ended.has(credential.id)) stream.endFor(ended.get(credential.id)!);
  }
}

/** `a,b` → the types, each one known (422 naming the first that is not); null for all. */
function parseTypes(raw: string | undefined): readonly string[] | null {
  if (raw === undefined) return null;
  const types = [...new Set(raw.split(',').map((t) => t.trim()))];
  for (const type of types) {
    if (!(STREAM_EVENT_TYPES as readonly string[]).includes(type)) {
      throw new ValidationError(
        'events',
        `unknown event type "${type}"; known: ${STREAM_EVENT_TYPES.join(', ')}`,
      );
    }
  }
  return types;
}

/** When an event id was made (its ULID's time), or +∞ for one no clock could have made. */
function idTime(id: string): number {
  try {
    return decodeTime(id.slice(4));
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}
