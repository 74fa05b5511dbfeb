import { describe, expect, it } from 'vitest';
import { ReadCache } from '../../src/db/read-cache.js';

function counted<V>(value: V | undefined) {
  const loader = { calls: 0, load: async () => (loader.calls++, value) };
  return loader;
}

describe('ReadCache', () => {
  it('disabled, every read loads', async () => {
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    const l = counted('v');
    await cache.get('k', l.load);
    await cache.get('k', l.load);
    expect(l.calls).toBe(2);
  });

  it('enabled, a found value is kept and served until invalidated', async () => {
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.setEnabled(true);
    const l = counted('v');
    expect(await cache.get('k', l.load)).toBe('v');
    expect(await cache.get('k', l.load)).toBe('v');
    expect(l.calls).toBe(1);
    cache.invalidate('k');
    await cache.get('k', l.load);
    expect(l.calls).toBe(2);
    cache.clear();
    await cache.get('k', l.load);
    expect(l.calls).toBe(3);
  });

  it('a miss is not kept', async () => {
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.setEnabled(true);
    const l = counted<string>(undefined);
    expect(await cache.get('k', l.load)).toBeUndefined();
    await cache.get('k', l.load);
    expect(l.calls).toBe(2);
  });

  it('a load in flight when an invalidation happens is returned but not kept (it may predate the write)', async () => {
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.setEnabled(true);
    let release!: () => void;
    const slow = cache.get(
      'k',
      () => new Promise<string>((resolve) => (release = () => resolve('old'))),
    );
    cache.invalidate('other');
    release();
    expect(await slow).toBe('old');
    const l = counted('new');
    expect(await cache.get('k', l.load)).toBe('new');
    expect(l.calls).toBe(1);
  });

  it('disabling empties it, and a load that straddles re-enabling is not kept', async () => {
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    cache.setEnabled(true);
    await cache.get('k', async () => 'v');
    cache.setEnabled(false);
    let release!: () => void;
    const straddling = cache.get(
      'k',
      () => new Promise<string>((resolve) => (release = () => resolve('stale'))),
    );
    cache.setEnabled(true);
    release();
    await straddling;
    const l = counted('fresh');
    expect(await cache.get('k', l.load)).toBe('fresh');
    expect(l.calls).toBe(1);
  });

  it('an entry expires after the TTL', async () => {
    let now = 1_000;
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 500, now: () => now });
    cache.setEnabled(true);
    const l = counted('v');
    await cache.get('k', l.load);
    now += 499;
    await cache.get('k', l.load);
    expect(l.calls).toBe(1);
    now += 1;
    await cache.get('k', l.load);
    expect(l.calls).toBe(2);
  });

  it('beyond maxEntries the oldest entry goes', async () => {
    const cache = new ReadCache<string>({ maxEntries: 2, ttlMs: 60_000 });
    cache.setEnabled(true);
    const a = counted('a');
    const b = counted('b');
    const c = counted('c');
    await cache.get('a', a.load);
    await cache.get('b', b.load);
    await cache.get('c', c.load);
    await cache.get('b', b.load);
    await cache.get('c', c.load);
    expect([b.calls, c.calls]).toEqual([1, 1]);
    await cache.get('a', a.load);
    expect(a.calls).toBe(2);
  });
});
