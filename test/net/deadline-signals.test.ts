import { describe, expect, it } from 'vitest';
import { DeadlineSignals } from '../../src/net/deadline-signals.js';

describe('DeadlineSignals', () => {
  it('shares one signal among the calls of one slice, and makes another for the next', () => {
    const deadlines = new DeadlineSignals(20_000, 1_000);
    const t = 1_700_000_000_000;
    const first = deadlines.signal(t + 10);
    expect(deadlines.signal(t + 990)).toBe(first);
    expect(deadlines.signal(t + 1_010)).not.toBe(first);
  });

  it('aborts with a TimeoutError between ms and ms + grain after the call began', async () => {
    const deadlines = new DeadlineSignals(60, 40);
    const began = Date.now();
    const signal = deadlines.signal(began);
    expect(signal.aborted).toBe(false);
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
    const after = Date.now() - began;
    expect(after).toBeGreaterThanOrEqual(55);
    expect(after).toBeLessThan(1_000);
    expect((signal.reason as Error).name).toBe('TimeoutError');
    // A call starting now gets a live signal, not the spent one.
    expect(deadlines.signal().aborted).toBe(false);
  });
});
