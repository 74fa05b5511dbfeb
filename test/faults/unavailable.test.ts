import { describe, expect, it } from 'vitest';
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
    expect(failures.length).toBeGreaterThanOrEqual(4);
    expect(failures.length).toBeLessThan(12);
    expect(failures.slice(0, 4)).toEqual([1, 2, 3, 4]);
    failing = false;
    const before = calls.length;
    await new Promise((r) => setTimeout(r, 200));
    await loop.stop();
    // Back to the normal interval once the step succeeds.
    expect(calls.length - before).toBeGreaterThan(5);
  });
});
