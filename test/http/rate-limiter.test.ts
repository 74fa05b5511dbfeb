import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../tcp-proxy.js';
import { Redis } from 'ioredis';
import {
  MemoryRateLimiter,
  RedisRateLimiter,
  type RateLimitDecision,
  type RateLimiter,
} from '../../src/http/rate-limiter.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SKIP_REDIS = process.env.SKIP_REDIS_TESTS === '1';
const WINDOW = 60_000;
// Far from Date.now() on purpose: nothing may depend on the wall clock when time is injected.
const T0 = 1_000_000_000_000;

interface Backend {
  name: string;
  skip: boolean;
  make(opts?: { windowMs?: number }): RateLimiter;
}

const backends: Backend[] = [
  { name: 'MemoryRateLimiter', skip: false, make: (opts) => new MemoryRateLimiter(opts) },
  {
    name: 'RedisRateLimiter',
    skip: SKIP_REDIS,
    // A fresh prefix per limiter keeps tests (and parallel runs) from sharing counts.
    make: (opts) => new RedisRateLimiter({ url: REDIS_URL, keyPrefix: freshPrefix(), ...opts }),
  },
];

function freshPrefix(): string {
  return `sb:rl:test:${randomBytes(8).toString('hex')}:`;
}

const open: RateLimiter[] = [];
function track<T extends RateLimiter>(limiter: T): T {
  open.push(limiter);
  return limiter;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

async function hitMany(l: RateLimiter, key: string, limit: number, times: number, now: number) {
  const out: RateLimitDecision[] = [];
  for (let i = 0; i < times; i++) out.push(await l.hit(key, limit, now));
  return out;
}

for (const backend of backends) {
  describe.skipIf(backend.skip)(backend.name, () => {
    const make = (opts?: { windowMs?: number }) => track(backend.make(opts));

    if (backend.name === 'RedisRateLimiter') {
      // Fail with a clear message rather than a wall of timeouts when Redis is down.
      beforeAll(async () => {
        const probe = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
        probe.on('error', () => undefined);
        try {
          await probe.connect();
          await probe.ping();
        } catch (err) {
          throw new Error(
            `Redis at ${REDIS_URL} is unreachable (set SKIP_REDIS_TESTS=1 to skip): ${String(err)}`,
          );
        } finally {
          probe.disconnect();
        }
      });
    }

    it('allows exactly N in the window, counting remaining down N-1..0, then refuses', async () => {
      const l = make();
      const decisions = await hitMany(l, 'k', 5, 5, T0);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true]);
      expect(decisions.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0]);
      expect(decisions.every((d) => d.limit === 5 && d.retryAfterSeconds === 0)).toBe(true);

      const refused = await l.hit('k', 5, T0 + 1);
      expect(refused).toEqual({
        allowed: false,
        limit: 5,
        remaining: 0,
        resetSeconds: 60,
        retryAfterSeconds: 60,
      });
    });

    it('describes the first request of a fresh window', async () => {
      const l = make();
      expect(await l.hit('fresh', 100, T0)).toEqual({
        allowed: true,
        limit: 100,
        remaining: 99,
        resetSeconds: 60,
        retryAfterSeconds: 0,
      });
    });

    it('sets Retry-After to ceil((oldest + window - now) / 1000), at least 1', async () => {
      const l = make();
      await l.hit('k', 3, T0);
      await l.hit('k', 3, T0 + 1_500);
      await l.hit('k', 3, T0 + 2_000);

      const a = await l.hit('k', 3, T0 + 10_250);
      expect(a.allowed).toBe(false);
      expect(a.retryAfterSeconds).toBe(Math.ceil((T0 + WINDOW - (T0 + 10_250)) / 1000)); // 50
      expect(a.retryAfterSeconds).toBe(50);
      expect(a.remaining).toBe(0);

      const b = await l.hit('k', 3, T0 + 59_000);
      expect(b.retryAfterSeconds).toBe(1);
      const c = await l.hit('k', 3, T0 + 59_999);
      expect(c.retryAfterSeconds).toBe(1);
      expect(c.resetSeconds).toBe(1);
    });

    it('rounds reset seconds up to the oldest counted request leaving the window', async () => {
      const l = make();
      await l.hit('k', 10, T0);
      expect((await l.hit('k', 10, T0 + 400)).resetSeconds).toBe(60); // 59.6 s
      expect((await l.hit('k', 10, T0 + 1_000)).resetSeconds).toBe(59); // exactly 59 s
      expect((await l.hit('k', 10, T0 + 1_001)).resetSeconds).toBe(59); // 58.999 s
      // Once T0 leaves, the oldest is T0+400.
      expect((await l.hit('k', 10, T0 + 60_000)).resetSeconds).toBe(1); // 0.4 s
      expect((await l.hit('k', 10, T0 + 60_400)).resetSeconds).toBe(1); // T0+1000 leaves in 0.6 s
    });

    it('frees a slot exactly at t + window, not at t + window - 1', async () => {
      const l = make();
      expect((await l.hit('k', 1, T0)).allowed).toBe(true);

      const justBefore = await l.hit('k', 1, T0 + WINDOW - 1);
      expect(justBefore).toMatchObject({ allowed: false, retryAfterSeconds: 1, resetSeconds: 1 });

      const atBoundary = await l.hit('k', 1, T0 + WINDOW);
      expect(atBoundary).toEqual({
        allowed: true,
        limit: 1,
        remaining: 0,
        resetSeconds: 60,
        retryAfterSeconds: 0,
      });
    });

    it('does not count refused requests', async () => {
      const l = make();
      expect((await l.hit('k', 2, T0)).allowed).toBe(true);
      expect((await l.hit('k', 2, T0 + 10_000)).allowed).toBe(true);
      for (const t of [20_000, 30_000, 59_999]) {
        expect((await l.hit('k', 2, T0 + t)).allowed).toBe(false);
      }
      // T0 has left; had the refusals counted, they would still fill the window.
      expect(await l.hit('k', 2, T0 + 60_000)).toMatchObject({ allowed: true, remaining: 0 });
      const refused = await l.hit('k', 2, T0 + 60_001);
      expect(refused).toMatchObject({ allowed: false, retryAfterSeconds: 10 }); // T0+10s leaves in 9.999 s
      expect(await l.hit('k', 2, T0 + 70_000)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('applies a lower limit at once and a raised one as well', async () => {
      const l = make();
      for (let i = 0; i < 5; i++) await l.hit('k', 10, T0 + i * 1_000);

      const lowered = await l.hit('k', 3, T0 + 5_000);
      expect(lowered.allowed).toBe(false);
      expect(lowered.limit).toBe(3);
      expect(lowered.remaining).toBe(0);
      expect(lowered.resetSeconds).toBe(55); // T0 leaves at T0+60s
      // 5 counted against 3: a slot frees only once T0, T0+1s and T0+2s have all left.
      expect(lowered.retryAfterSeconds).toBe(57);

      expect((await l.hit('k', 3, T0 + 61_999)).allowed).toBe(false);
      expect(await l.hit('k', 3, T0 + 62_000)).toMatchObject({ allowed: true, remaining: 0 });

      // Raising it again: 3 counted (T0+3s, T0+4s, T0+62s) plus this one.
      expect(await l.hit('k', 10, T0 + 62_001)).toMatchObject({
        allowed: true,
        limit: 10,
        remaining: 6,
      });
    });

    it('keeps keys independent', async () => {
      const l = make();
      await hitMany(l, 'a', 2, 2, T0);
      expect((await l.hit('a', 2, T0)).allowed).toBe(false);
      expect(await l.hit('b', 2, T0)).toMatchObject({ allowed: true, remaining: 1 });
      expect((await l.hit('a', 2, T0)).allowed).toBe(false);
    });

    it('counts several hits in the same millisecond separately', async () => {
      const l = make();
      const decisions = await hitMany(l, 'k', 3, 4, T0);
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
    });

    it('refuses everything at limit 0 without counting anything', async () => {
      const l = make();
      expect(await l.hit('k', 0, T0)).toEqual({
        allowed: false,
        limit: 0,
        remaining: 0,
        resetSeconds: 0,
        retryAfterSeconds: 60,
      });
      expect(await l.hit('k', 1, T0)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('honours a custom window', async () => {
      const l = make({ windowMs: 2_000 });
      expect(await l.hit('k', 1, T0)).toMatchObject({ allowed: true, resetSeconds: 2 });
      expect(await l.hit('k', 1, T0 + 1_999)).toMatchObject({
        allowed: false,
        retryAfterSeconds: 1,
      });
      expect((await l.hit('k', 1, T0 + 2_000)).allowed).toBe(true);
    });

    it('uses the wall clock when no time is given', async () => {
      const l = make();
      expect(await l.hit('k', 1)).toMatchObject({ allowed: true, resetSeconds: 60 });
      expect(await l.hit('k', 1)).toMatchObject({ allowed: false, retryAfterSeconds: 60 });
    });

    it('rejects limits that are not non-negative integers', async () => {
      const l = make();
      await expect(l.hit('k', -1, T0)).rejects.toThrow(RangeError);
      await expect(l.hit('k', 1.5, T0)).rejects.toThrow(RangeError);
      await expect(l.hit('k', Number.NaN, T0)).rejects.toThrow(RangeError);
    });
  });
}

describe('MemoryRateLimiter only', () => {
  it('counts exactly across bulk compaction of thousands of expired entries', async () => {
    const l = track(new MemoryRateLimiter());
    for (let i = 0; i < 3000; i++) await l.hit('bulk', 5000, 1_000 + i);
    // Everything above has left the window; 10 new hits are the only ones counted.
    for (let i = 0; i < 10; i++) await l.hit('bulk', 5000, 70_000 + i);
    const d = await l.hit('bulk', 5000, 70_010);
    expect(d.remaining).toBe(5000 - 11);
    expect(d.resetSeconds).toBe(60);
    // The six at 70000–70005 leave (an entry counts while now − t < 60 s); five stay, plus this one.
    const later = await l.hit('bulk', 5000, 130_005);
    expect(later.remaining).toBe(5000 - 6);
  });

  it('sweeps keys whose newest request has left the window', async () => {
    const l = track(new MemoryRateLimiter());
    await l.hit('idle', 5, T0);
    await l.hit('busy', 5, T0);
    await l.hit('busy', 5, T0 + 30_000);

    expect(l.sweep(T0 + 59_999)).toBe(0);
    expect(l.sweep(T0 + 60_000)).toBe(1); // only 'idle'
    // 'busy' still holds T0+30s; T0 itself has left.
    expect(await l.hit('busy', 2, T0 + 60_000)).toMatchObject({ allowed: true, remaining: 0 });
    expect(l.sweep(T0 + 120_000)).toBe(1);
  });

  it('sweeps by the injected clock, not the wall clock', async () => {
    const l = track(new MemoryRateLimiter());
    await l.hit('k', 1, T0); // T0 is decades behind Date.now()
    expect(l.sweep()).toBe(0);
    expect((await l.hit('k', 1, T0 + 1)).allowed).toBe(false);
  });

  it('refuses to work after close', async () => {
    const l = new MemoryRateLimiter();
    await l.close();
    await expect(l.hit('k', 1, T0)).rejects.toThrow(/closed/);
  });

  it('rejects a non-positive window', () => {
    expect(() => new MemoryRateLimiter({ windowMs: 0 })).toThrow(RangeError);
  });
});

describe.skipIf(SKIP_REDIS)('RedisRateLimiter only', () => {
  it('shares one count between two instances (like two processes)', async () => {
    const keyPrefix = freshPrefix();
    const a = track(new RedisRateLimiter({ url: REDIS_URL, keyPrefix }));
    const b = track(new RedisRateLimiter({ url: REDIS_URL, keyPrefix }));

    expect(await a.hit('k', 4, T0)).toMatchObject({ allowed: true, remaining: 3 });
    expect(await b.hit('k', 4, T0)).toMatchObject({ allowed: true, remaining: 2 });
    expect(await a.hit('k', 4, T0 + 1)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await b.hit('k', 4, T0 + 1)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await a.hit('k', 4, T0 + 2)).allowed).toBe(false);
    expect((await b.hit('k', 4, T0 + 2)).allowed).toBe(false);
    expect((await b.hit('k', 4, T0 + WINDOW)).allowed).toBe(true);
  });

  it('allows exactly 100 of 150 concurrent hits across two connections', async () => {
    const keyPrefix = freshPrefix();
    const a = track(new RedisRateLimiter({ url: REDIS_URL, keyPrefix }));
    const b = track(new RedisRateLimiter({ url: REDIS_URL, keyPrefix }));
    const decisions = await Promise.all(
      Array.from({ length: 150 }, (_, i) => (i % 2 === 0 ? a : b).hit('k', 100, T0)),
    );
    const allowed = decisions.filter((d) => d.allowed);
    expect(allowed).toHaveLength(100);
    expect(new Set(allowed.map((d) => d.remaining))).toEqual(
      new Set(Array.from({ length: 100 }, (_, i) => i)),
    );
    expect(decisions.filter((d) => !d.allowed).every((d) => d.remaining === 0)).toBe(true);
  });

  it('allows exactly 100 of 150 concurrent hits without injected time', async () => {
    const l = track(new RedisRateLimiter({ url: REDIS_URL, keyPrefix: freshPrefix() }));
    const decisions = await Promise.all(Array.from({ length: 150 }, () => l.hit('k', 100)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(100);
  });

  it('stores one expiring sorted set per key under the prefix', async () => {
    const keyPrefix = freshPrefix();
    const l = track(new RedisRateLimiter({ url: REDIS_URL, keyPrefix }));
    await l.hit('k', 5, T0);
    await l.hit('k', 5, T0);
    const raw = new Redis(REDIS_URL);
    try {
      expect(await raw.type(`${keyPrefix}k`)).toBe('zset');
      expect(await raw.zcard(`${keyPrefix}k`)).toBe(2);
      const ttl = await raw.pttl(`${keyPrefix}k`);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(WINDOW);
    } finally {
      await raw.quit();
    }
  });

  it('defaults the key prefix to sb:rl:', async () => {
    const key = `test:${randomBytes(8).toString('hex')}`;
    const l = track(new RedisRateLimiter({ url: REDIS_URL }));
    await l.hit(key, 5, T0);
    const raw = new Redis(REDIS_URL);
    try {
      expect(await raw.exists(`sb:rl:${key}`)).toBe(1);
      await raw.del(`sb:rl:${key}`);
    } finally {
      await raw.quit();
    }
  });

  it('counts in process, promptly, when Redis is unreachable, and still closes', async () => {
    const warnings: string[] = [];
    const l = new RedisRateLimiter({
      url: 'redis://127.0.0.1:1',
      log: { warn: (_o, msg) => warnings.push(msg), info: () => undefined },
    });
    try {
      const started = Date.now();
      expect(await l.hit('k', 2, T0)).toMatchObject({ allowed: true, remaining: 1 });
      expect(await l.hit('k', 2, T0 + 1)).toMatchObject({ allowed: true, remaining: 0 });
      expect(await l.hit('k', 2, T0 + 2)).toMatchObject({ allowed: false, retryAfterSeconds: 60 });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(l.degraded).toBe(true);
      // One warning for the outage, not one per request.
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/counting in this process/);
    } finally {
      await l.close();
    }
  }, 10_000);

  it('counts in process within its command timeout when Redis accepts connections but never answers', async () => {
    // A silent partition: the connection is up, no reply ever comes.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const l = new RedisRateLimiter({ url: `redis://127.0.0.1:${port}` });
    try {
      const started = Date.now();
      expect(await l.hit('k', 1, T0)).toMatchObject({ allowed: true });
      expect(Date.now() - started).toBeLessThan(5_000);
      // Later hits do not wait on the silent server at all.
      const next = Date.now();
      expect(await l.hit('k', 1, T0 + 1)).toMatchObject({ allowed: false });
      expect(Date.now() - next).toBeLessThan(100);
    } finally {
      await l.close();
      for (const s of sockets) s.destroy();
      silent.close();
    }
  }, 10_000);

  it.skipIf(SKIP_REDIS)(
    'goes back to counting in Redis once it answers again',
    async () => {
      const proxy = await new TcpProxy(Number(new URL(REDIS_URL).port || 6379)).start();
      const prefix = `sb:test:${randomBytes(6).toString('hex')}:`;
      const notices: string[] = [];
      const l = new RedisRateLimiter({
        url: `redis://127.0.0.1:${proxy.port}`,
        keyPrefix: prefix,
        probeMs: 100,
        log: {
          warn: (_o, msg) => notices.push(`warn ${msg}`),
          info: (_o, msg) => notices.push(`info ${msg}`),
        },
      });
      const raw = new Redis(REDIS_URL);
      try {
        await l.hit('k', 10, Date.now());
        expect(await raw.zcard(`${prefix}k`)).toBe(1);

        await proxy.cut();
        for (let i = 0; i < 3; i++) expect((await l.hit('k', 10, Date.now())).allowed).toBe(true);
        expect(l.degraded).toBe(true);
        expect(await raw.zcard(`${prefix}k`)).toBe(1); // counted in process meanwhile

        await proxy.restore();
        const deadline = Date.now() + 10_000;
        while (l.degraded && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(l.degraded).toBe(false);
        // A hit sent just as the link was cut may still land once it is back (at most once),
        // so the rule is judged by the next hit: it is counted in Redis again.
        const before = await raw.zcard(`${prefix}k`);
        expect(before).toBeLessThanOrEqual(2);
        await l.hit('k', 10, Date.now());
        expect(await raw.zcard(`${prefix}k`)).toBe(before + 1);
        expect(notices.map((n) => n.split(' ')[0])).toEqual(['warn', 'info']);
      } finally {
        await raw.del(`${prefix}k`);
        await raw.quit();
        await l.close();
        await proxy.close();
      }
    },
    20_000,
  );
});
