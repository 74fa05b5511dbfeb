import { randomBytes } from 'node:crypto';
import { Redis, type Result } from 'ioredis';

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  /** After this request; 0 when refused. */
  remaining: number;
  /** Ceil seconds until the oldest counted request leaves the window; 0 when nothing is counted. */
  resetSeconds: number;
  /** When refused: ceil seconds until a slot frees, at least 1; 0 when allowed. */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  /** Counts one request for `key` against `limit` per `windowMs` (default 60_000) unless it is refused. */
  hit(key: string, limit: number, nowMs?: number): Promise<RateLimitDecision>;
  close(): Promise<void>;
}

const DEFAULT_WINDOW_MS = 60_000;
const MAX_SWEEP_INTERVAL_MS = 60_000;
const MIN_SWEEP_INTERVAL_MS = 1_000;

function checkWindow(windowMs: number): number {
  if (!Number.isSafeInteger(windowMs) || windowMs <= 0) {
    throw new RangeError(`windowMs must be a positive integer, got ${windowMs}`);
  }
  return windowMs;
}

// A limit of 0 is accepted (a suspended plan refuses everything); anything that is not a
// whole number is a configuration bug and should fail loudly rather than silently allow or refuse.
function checkHitArgs(limit: number, nowMs: number): void {
  if (!Number.isSafeInteger(limit) || limit < 0) {
    throw new RangeError(`limit must be a non-negative integer, got ${limit}`);
  }
  if (!Number.isFinite(nowMs)) {
    throw new RangeError(`nowMs must be a finite number, got ${nowMs}`);
  }
}

/**
 * Shared by both backends so the header arithmetic cannot drift between them.
 * `count` is the number of counted requests after this call, `oldest` the timestamp of the
 * oldest of them, and `blocker` (only meaningful when refused) the timestamp whose expiry
 * brings the count below the limit.
 */
function decide(
  allowed: boolean,
  limit: number,
  count: number,
  oldest: number | undefined,
  blocker: number | undefined,
  nowMs: number,
  windowMs: number,
): RateLimitDecision {
  // Clamped to the window because an entry written by a process whose clock runs ahead
  // must not make clients wait longer than one full window.
  const secondsUntil = (ms: number): number =>
    Math.ceil(Math.min(Math.max(ms, 0), windowMs) / 1000);
  return {
    allowed,
    limit,
    remaining: allowed ? Math.max(0, limit - count) : 0,
    resetSeconds: oldest === undefined ? 0 : Math.max(1, secondsUntil(oldest + windowMs - nowMs)),
    retryAfterSeconds: allowed
      ? 0
      : // With no blocker (limit 0) no expiry will ever free a slot; a full window is the
        // least misleading hint, since the plan may have changed by then.
        Math.max(1, secondsUntil(blocker === undefined ? windowMs : blocker + windowMs - nowMs)),
  };
}

/** First index whose value is > `cutoff`; `log` is sorted ascending. */
function firstAfter(log: readonly number[], cutoff: number, from = 0): number {
  let lo = from;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log[mid] as number) <= cutoff) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class MemoryRateLimiter implements RateLimiter {
  private readonly windowMs: number;
  /**
   * Per key, timestamps of counted requests, sorted ascending, from `head` on: expired entries
   * are skipped by moving `head` and compacted away in bulk, so a hit costs O(log n), not O(n).
   */
  private readonly logs = new Map<string, { ts: number[]; head: number }>();
  private readonly sweepTimer: NodeJS.Timeout;
  private closed = false;
  // The sweeper runs on wall-clock timers but hits may carry injected time; tracking the
  // last hit's time lets the sweeper extrapolate the caller's clock instead of mixing clocks
  // (mixing them would wipe live entries whenever the injected clock lags Date.now()).
  private lastHitNowMs = Number.NEGATIVE_INFINITY;
  private lastHitRealMs = 0;

  constructor(opts: { windowMs?: number } = {}) {
    this.windowMs = checkWindow(opts.windowMs ?? DEFAULT_WINDOW_MS);
    const every = Math.min(MAX_SWEEP_INTERVAL_MS, Math.max(MIN_SWEEP_INTERVAL_MS, this.windowMs));
    this.sweepTimer = setInterval(() => this.sweep(), every);
    // Idle keys are only a memory concern; the timer must never keep the process alive.
    this.sweepTimer.unref();
  }

  async hit(key: string, limit: number, nowMs: number = Date.now()): Promise<RateLimitDecision> {
    if (this.closed) throw new Error('MemoryRateLimiter is closed');
    checkHitArgs(limit, nowMs);
    if (nowMs >= this.lastHitNowMs) {
      this.lastHitNowMs = nowMs;
      this.lastHitRealMs = Date.now();
    }

    let log = this.logs.get(key);
    if (log === undefined) {
      log = { ts: [], head: 0 };
      this.logs.set(key, log);
    }
    const ts = log.ts;
    log.head = firstAfter(ts, nowMs - this.windowMs, log.head);
    if (log.head > 1024 && log.head * 2 > ts.length) {
      ts.splice(0, log.head);
      log.head = 0;
    }

    const allowed = ts.length - log.head < limit;
    if (allowed) {
      // Callers' clocks can step backwards (NTP, injected time); keeping the log sorted
      // keeps pruning and the oldest/blocker lookups correct regardless.
      const last = ts[ts.length - 1];
      if (last === undefined || nowMs >= last) ts.push(nowMs);
      else ts.splice(firstAfter(ts, nowMs, log.head), 0, nowMs);
    }

    const count = ts.length - log.head;
    if (count === 0) this.logs.delete(key);
    // Only when refused because of a lowered limit can count exceed limit; the slot frees
    // when enough of the oldest entries have left to bring count back under the limit.
    const blocker = !allowed && limit > 0 ? ts[ts.length - limit] : undefined;
    return decide(allowed, limit, count, ts[log.head], blocker, nowMs, this.windowMs);
  }

  /**
   * Drops keys whose newest counted request has left the window. Runs on a timer; exposed so
   * operators and tests can trigger it. Returns the number of keys dropped.
   */
  sweep(nowMs: number = this.estimatedNow()): number {
    const cutoff = nowMs - this.windowMs;
    let dropped = 0;
    for (const [key, log] of this.logs) {
      const newest = log.ts[log.ts.length - 1];
      if (newest === undefined || newest <= cutoff) {
        this.logs.delete(key);
        dropped++;
      }
    }
    return dropped;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.logs.clear();
  }

  private estimatedNow(): number {
    if (this.lastHitNowMs === Number.NEGATIVE_INFINITY) return Date.now();
    return this.lastHitNowMs + (Date.now() - this.lastHitRealMs);
  }
}

type HitReply = [allowed: number, count: number, oldest: string, blocker: string];

declare module 'ioredis' {
  interface RedisCommander<Context> {
    switchboardRateLimitHit(
      key: string,
      nowMs: string,
      cutoffMs: string,
      windowMs: string,
      limit: string,
      member: string,
    ): Result<HitReply, Context>;
  }
}

// One script so prune/count/add/read happen atomically: separate commands would let
// concurrent processes both see "limit - 1" and both add.
// Timestamps travel as strings formatted by JS and come back as strings formatted by Redis
// (%.17g), so no precision is lost to Lua's number formatting.
// The score at index count-limit is the entry whose expiry brings the count below the
// limit; it is the oldest one unless the limit was lowered since the entries were counted.
const HIT_SCRIPT = `
local key = KEYS[1]
local limit = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[2])
local count = redis.call('ZCARD', key)
local allowed = 0
if count < limit then
  redis.call('ZADD', key, ARGV[1], ARGV[5])
  count = count + 1
  allowed = 1
end
local oldest = ''
local blocker = ''
if count > 0 then
  oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  if allowed == 0 and limit > 0 then
    blocker = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')[2]
  end
  redis.call('PEXPIRE', key, ARGV[3])
end
return {allowed, count, oldest, blocker}
`;

function parseScore(raw: string): number | undefined {
  return raw === '' ? undefined : Number(raw);
}

interface RateLimitLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * Counts in Redis, so that every process of the service shares one count per key. While Redis is
 * unreachable or does not answer in time, it counts in this process instead (each process then
 * counts alone, so a client spread over N processes gets up to N times its limit): requests are
 * still limited, never let through uncounted, and never wait on a dead Redis. The outage is
 * logged once when it starts and once when it ends; a ping every `probeMs` notices Redis's
 * return, and counting goes back to Redis from then on.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly windowMs: number;
  private readonly keyPrefix: string;
  // Members must be unique across processes and within one millisecond, or two hits in the
  // same ms would collapse into one sorted-set entry and be counted once.
  private readonly instanceId = randomBytes(6).toString('base64url');
  private seq = 0;
  private closing: Promise<void> | undefined;
  private readonly fallback: MemoryRateLimiter;
  private readonly log: RateLimitLog | undefined;
  private readonly probeMs: number;
  private probe: NodeJS.Timeout | null = null;
  private probing = false;

  constructor(opts: {
    url: string;
    windowMs?: number;
    keyPrefix?: string;
    log?: RateLimitLog;
    /** How often Redis is pinged during an outage to notice that it is back. */
    probeMs?: number;
  }) {
    this.windowMs = checkWindow(opts.windowMs ?? DEFAULT_WINDOW_MS);
    this.keyPrefix = opts.keyPrefix ?? 'sb:rl:';
    this.log = opts.log;
    this.probeMs = opts.probeMs ?? 1_000;
    this.fallback = new MemoryRateLimiter({ windowMs: this.windowMs });
    this.redis = new Redis(opts.url, {
      // Fail a hit quickly while Redis is down instead of stalling the request; the hit is
      // then counted in process.
      maxRetriesPerRequest: 2,
      enableOfflineQueue: true,
      // A Redis that stops answering (a silent network partition) must not hold requests either.
      commandTimeout: 500,
    });
    // Failures reach hit() as rejected commands; without a listener ioredis would also print
    // every reconnect error to stderr.
    this.redis.on('error', () => undefined);
    // Queued only until the first connection: after that, a command issued while the connection
    // is down fails at once (the hit is counted in process) rather than waiting in ioredis's
    // offline queue, from which it would still run after the reconnect, once it had already been
    // counted here: counted twice.
    this.redis.once('ready', () => {
      this.redis.options.enableOfflineQueue = false;
    });
    this.redis.defineCommand('switchboardRateLimitHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  }

  /** True while hits are counted in this process because Redis is unreachable. */
  get degraded(): boolean {
    return this.probe !== null;
  }

  async hit(key: string, limit: number, nowMs: number = Date.now()): Promise<RateLimitDecision> {
    checkHitArgs(limit, nowMs);
    if (this.degraded) return this.fallback.hit(key, limit, nowMs);
    try {
      return await this.hitRedis(key, limit, nowMs);
    } catch (err) {
      if (this.closing) throw err;
      this.startOutage(err);
      return this.fallback.hit(key, limit, nowMs);
    }
  }

  private async hitRedis(key: string, limit: number, nowMs: number): Promise<RateLimitDecision> {
    const member = `${nowMs}-${this.instanceId}-${(this.seq++).toString(36)}`;
    const reply = await this.redis.switchboardRateLimitHit(
      this.keyPrefix + key,
      String(nowMs),
      String(nowMs - this.windowMs),
      String(this.windowMs),
      String(limit),
      member,
    );
    if (!Array.isArray(reply) || reply.length !== 4) {
      throw new Error(`unexpected rate limit script reply: ${JSON.stringify(reply)}`);
    }
    const [allowed, count, oldest, blocker] = reply;
    return decide(
      allowed === 1,
      limit,
      Number(count),
      parseScore(oldest),
      parseScore(blocker),
      nowMs,
      this.windowMs,
    );
  }

  private startOutage(err: unknown): void {
    if (this.probe) return;
    this.log?.warn(
      { err },
      'rate limits: Redis unreachable; counting in this process until it answers again (each process counts alone)',
    );
    this.probe = setInterval(() => void this.checkBack(), this.probeMs);
    // Only a check; it must never keep the process alive.
    this.probe.unref();
  }

  private async checkBack(): Promise<void> {
    if (this.probing || !this.probe) return;
    this.probing = true;
    try {
      await this.redis.ping();
      if (this.probe) clearInterval(this.probe);
      this.probe = null;
      this.log?.info({}, 'rate limits: Redis answers again; counting there');
    } catch {
      // Still down: the next tick tries again.
    } finally {
      this.probing = false;
    }
  }

  async close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.probe) clearInterval(this.probe);
      await this.fallback.close();
      await this.redis.quit().then(
        () => undefined,
        // quit() rejects if Redis never came back; the socket still has to go.
        () => this.redis.disconnect(),
      );
    })();
    return this.closing;
  }
}
