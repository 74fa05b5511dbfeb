import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

// HEAP_GROWING_PERCENT: read and checked, and applied to V8 as a process starts.

const HEAP_GROWTH = fileURLToPath(new URL('../../src/runtime/heap-growth.ts', import.meta.url));

/**
 * A process that applies `percent` and then works as an import does: batches of small objects
 * kept across a few young collections (so promoted) and dropped; its old generation's largest
 * size, in MB.
 */
function oldSpacePeakMb(percent: number): number {
  const script = `
    import v8 from 'node:v8';
    import { applyHeapGrowth } from ${JSON.stringify(HEAP_GROWTH)};
    applyHeapGrowth(${percent});
    const kept = [];
    let peak = 0;
    for (let round = 0; round < 600; round++) {
      const batch = [];
      for (let i = 0; i < 20000; i++) batch.push({ line: i, name: 'Person ' + i, tags: ['a', 'b'] });
      kept.push(batch);
      if (kept.length > 8) kept.shift();
      const old = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space');
      peak = Math.max(peak, old.space_size);
    }
    process.stdout.write(String(peak / 1048576));
  `;
  const run = spawnSync(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', script],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  if (run.status !== 0) throw new Error(run.stderr);
  return Number(run.stdout);
}

describe('HEAP_GROWING_PERCENT', () => {
  it('is 100 unless set; 0 leaves V8 its own; anything else is a configuration error', () => {
    expect(loadConfig({}).heapGrowingPercent).toBe(100);
    expect(loadConfig({ HEAP_GROWING_PERCENT: '0' }).heapGrowingPercent).toBe(0);
    expect(loadConfig({ HEAP_GROWING_PERCENT: '50' }).heapGrowingPercent).toBe(50);
    for (const bad of ['-1', '301', 'half'])
      expect(() => loadConfig({ HEAP_GROWING_PERCENT: bad })).toThrow(ConfigError);
  });

  it('keeps the garbage of promoted batches to about what is alive, where V8 alone lets it grow', () => {
    const own = oldSpacePeakMb(0);
    const capped = oldSpacePeakMb(100);
    expect(capped).toBeLessThan(own * 0.75);
  }, 120_000);
});
