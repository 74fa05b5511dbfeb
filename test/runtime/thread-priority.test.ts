import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

// WORKER_THREAD_NICE: read and checked; lowerThreadPriority lowers the calling thread alone, by
// the steps asked, at most to 19, and not at all with 0. Run in a process of its own, so that no
// thread of the test runner is slowed.

const PRIORITY = new URL('../../src/runtime/thread-priority.ts', import.meta.url).href;
const NICE = new URL('./thread-nice.ts', import.meta.url).href;
const TSX = import.meta.resolve('tsx/esm/api');

/**
 * In a new process: the pool started by the main thread, then a worker thread that asks for 0, 5
 * and 30 more steps (each answer) and then uses the pool; the nice value of every thread of the
 * process after.
 */
function lowered(): { answers: (number | null)[]; nice: number[]; main: number } {
  // Node 20 does not carry --import hooks into workers: the worker registers tsx itself (it is
  // a module, as --input-type=module makes the process's eval code).
  const worker = `
    import { access } from 'node:fs/promises';
    import { parentPort } from 'node:worker_threads';
    const t = await import(${JSON.stringify(TSX)});
    t.register();
    const m = await import(${JSON.stringify(PRIORITY)});
    const answers = [0, 5, 30].map((n) => m.lowerThreadPriority(n));
    // Lowered, it uses libuv's pool, as the workers do (DNS lookups, file reads).
    await Promise.all(Array.from({ length: 8 }, () => access('.')));
    parentPort.postMessage(answers);
  `;
  const script = `
    import { Worker } from 'node:worker_threads';
    import { startThreadPool } from ${JSON.stringify(PRIORITY)};
    import { threadNice } from ${JSON.stringify(NICE)};
    startThreadPool();
    const w = new Worker(${JSON.stringify(worker)}, { eval: true });
    w.once('message', (answers) => {
      const nice = threadNice('self');
      process.stdout.write(JSON.stringify({ answers, nice: [...nice.values()], main: nice.get(process.pid) }));
      process.exit(0);
    });
  `;
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (run.status !== 0) throw new Error(run.stderr);
  return JSON.parse(run.stdout) as { answers: (number | null)[]; nice: number[]; main: number };
}

describe('WORKER_THREAD_NICE', () => {
  it('is 10 unless set; 0 to 19; anything else is a configuration error', () => {
    expect(loadConfig({}).workerThreadNice).toBe(10);
    expect(loadConfig({ WORKER_THREAD_NICE: '0' }).workerThreadNice).toBe(0);
    expect(loadConfig({ WORKER_THREAD_NICE: '19' }).workerThreadNice).toBe(19);
    for (const bad of ['-1', '20', 'low'])
      expect(() => loadConfig({ WORKER_THREAD_NICE: bad })).toThrow(ConfigError);
  });

  it.skipIf(process.platform !== 'linux')(
    'lowers the calling thread alone: 0 leaves it, steps add up, 19 at most; the pool keeps the main thread’s',
    () => {
      const { answers, nice, main } = lowered();
      expect(answers).toEqual([null, 5, 19]);
      expect(main).toBe(0);
      expect(nice.filter((n) => n !== 0)).toEqual([19]);
    },
    60_000,
  );
});
