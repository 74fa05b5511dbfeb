import { describe, expect, it, vi } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/errors.js';
import { PollLoop } from '../../src/jobs/poll-loop.js';

describe('isDatabaseUnavailable', () => {
  const withCode = (code: string) => Object.assign(new Error('x'), { code });

  it('recognises connection-class failures', () => {
    for (const code of ['08006', '08001', '08003', '57P01', '57P02', '57P03', 'ECONNREFUSED']) {
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(true);
    }
    for (const message of [
      'Connection terminated unexpectedly',
      'timeout exceeded when trying to connect',
      'Connection terminated due to connection timeout',
      'Client has encountered a connection error and is not queryable',
    ]) {
      expect(isDatabaseUnavailable(new Error(message)), message).toBe(true);
    }
    // Node reports a refused dual-stack connect as an AggregateError; wrappers keep a cause.
    expect(isDatabaseUnavailable(new AggregateError([withCode('ECONNREFUSED')], 'x'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('wrapped', { cause: withCode('57P01') }))).toBe(true);
  });

  it('leaves statement failures alone (they stay 4xx or 500)', () => {
    for (const code of ['23505', '22P02', '42P01', '40001', '57014']) {
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(false);
    }
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });
});

describe('PollLoop during an outage', () => {
  it('keeps going, backs off while the step fails, and resumes when it succeeds', async () => {
    const calls: number[] = [];
    const failures: number[] = [];
    let failing = true;
    const loop = new PollLoop(
      async () => {
        calls.push(Date.now());
        if (failing) throw new Error('Connection terminated unexpectedly');
        return false;
      },
      10,
      (_err, consecutive) => failures.push(consecutive),
      80,
    );
    loop.start();
    await new Promise((r) => setTimeout(r, 400));
    // 10, 20, 40, 80, 80… ms apart rather than every 10 ms.
    expect(calls.length).toBeGreaterThanOrEqual(4);
    expect(calls.length).toBeLessThan(12);
    // Reported once for the streak (the next report would be its 20th failure).
    expect(failures).toEqual([1]);
    failing = false;
    const before = calls.length;
    await new Promise((r) => setTimeout(r, 200));
    await loop.stop();
    // Back to the normal interval once the step succeeds.
    expect(calls.length - before).toBeGreaterThan(5);
  });

  it('reports a long streak at its first failure and then every 20th, and a new streak afresh', async () => {
    const reported: number[] = [];
    let calls = 0;
    const loop = new PollLoop(
      async () => {
        calls++;
        // 45 failures, one success, then a new streak.
        if (calls <= 45 || calls >= 47) throw new Error('Connection terminated unexpectedly');
        return false;
      },
      1,
      (_err, consecutive) => reported.push(consecutive),
      1,
    );
    loop.start();
    await vi.waitFor(() => expect(calls).toBeGreaterThan(50), { timeout: 5_000, interval: 5 });
    await loop.stop();
    expect(reported.slice(0, 4)).toEqual([1, 20, 40, 1]);
  });
});
