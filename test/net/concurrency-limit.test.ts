import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { ConcurrencyLimit } from '../../src/net/concurrency-limit.js';

describe('ConcurrencyLimit', () => {
  it('runs at most max at once, queues up to maxWaiting in arrival order, refuses the rest', async () => {
    const limit = new ConcurrencyLimit(2, 2);
    const release: (() => void)[] = [];
    const started: number[] = [];
    const task = (i: number) => () =>
      new Promise<number>((resolve) => {
        started.push(i);
        release.push(() => resolve(i));
      });
    const refuse = () => new Error('full');
    const runs = [0, 1, 2, 3].map((i) => limit.run(task(i), refuse));
    await expect(limit.run(task(4), refuse)).rejects.toThrow('full');
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    expect([limit.running, limit.queued]).toEqual([2, 2]);

    release[0]!();
    await runs[0];
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1, 2]);
    // A newcomer waits behind the queue rather than taking the freed slot.
    const late = limit.run(task(5), refuse);
    release[1]!();
    release[2]!();
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1, 2, 3, 5]);
    release[3]!();
    release[4]!();
    expect(await Promise.all([...runs, late])).toEqual([0, 1, 2, 3, 5]);
    expect([limit.running, limit.queued]).toEqual([0, 0]);
  });

  it('a task that throws frees its slot', async () => {
    const limit = new ConcurrencyLimit(1, 0);
    await expect(
      limit.run(
        () => Promise.reject(new Error('boom')),
        () => new Error('full'),
      ),
    ).rejects.toThrow('boom');
    expect(
      await limit.run(
        () => Promise.resolve('ok'),
        () => new Error('full'),
      ),
    ).toBe('ok');
  });
});

describe('MEDIA_FETCH_CONCURRENCY', () => {
  it('defaults to 16 and must be a whole number from 1 to 1024', () => {
    expect(loadConfig({}).mediaFetchConcurrency).toBe(16);
    expect(loadConfig({ MEDIA_FETCH_CONCURRENCY: '64' }).mediaFetchConcurrency).toBe(64);
    for (const bad of ['0', '-1', '1.5', 'many', '1025'])
      expect(() => loadConfig({ MEDIA_FETCH_CONCURRENCY: bad })).toThrow(ConfigError);
  });
});
