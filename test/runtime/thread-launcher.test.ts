// The launcher of the all-in-one service's worker thread, on a stand-in thread
// (fixtures/thread.ts): what the process learns when the thread fails to start, crashes, stops
// badly or answers a scrape late.
import { describe, expect, it, vi } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { startWorkerThread } from '../../src/runtime/thread-launcher.js';

const FIXTURE = new URL('./fixtures/thread.ts', import.meta.url);
const STORE = {
  url: 'postgres://unused',
  directUrl: 'postgres://unused',
  secretsKey: Buffer.alloc(32),
};

function start(mode: string, onCrash: (err: Error) => void = () => {}) {
  const config = { ...loadConfig({}), fixtureMode: mode } as Config;
  return startWorkerThread(config, STORE, onCrash, FIXTURE);
}

const sent = (metrics: { values: { value: number }[] }[]) => metrics[0]?.values[0]?.value;

describe('the worker thread launcher', () => {
  it('rejects when the thread fails as it starts, and reports no crash', async () => {
    const onCrash = vi.fn();
    await expect(start('fail-start', onCrash)).rejects.toThrow('no database here');
    expect(onCrash).not.toHaveBeenCalled();
  });

  it("hands over the thread's counters, and stops it", async () => {
    const thread = await start('well');
    expect(sent(await thread.metrics())).toBe(10);
    expect(sent(await thread.metrics())).toBe(20);
    await thread.stop();
    // Stopped: the last counters, never none (a counter that drops reads as a reset).
    expect(sent(await thread.metrics())).toBe(20);
  });

  it('answers a scrape the thread leaves unanswered with its last counters', async () => {
    const thread = await start('slow-metrics');
    expect(sent(await thread.metrics())).toBe(10);
    const asked = performance.now();
    expect(sent(await thread.metrics())).toBe(10);
    expect(performance.now() - asked).toBeGreaterThanOrEqual(1_900);
    await thread.stop();
  });

  it('tells the process when the running thread crashes', async () => {
    const onCrash = vi.fn();
    const thread = await start('crash', onCrash);
    await expect.poll(() => onCrash.mock.calls.length).toBe(1);
    expect((onCrash.mock.calls[0]![0] as Error).message).toBe('the workers broke');
    await thread.stop();
  });

  it("rejects the stop when the thread's own stop failed (exit code 1), as no crash", async () => {
    const onCrash = vi.fn();
    const thread = await start('stop-fails', onCrash);
    await expect(thread.stop()).rejects.toThrow('exit code 1');
    expect(onCrash).not.toHaveBeenCalled();
  });
});
