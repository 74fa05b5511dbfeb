import v8 from 'node:v8';

/**
 * How far V8 lets the old generation grow past what the last full collection kept, in percent
 * (HEAP_GROWING_PERCENT; 0 leaves V8 its own factor). V8's own goes up to 4× when collecting is
 * cheap, which is most of the time here: work that keeps its objects across a few awaits (an
 * import's batch, a broadcast's chunk) has them promoted, and the heap then fills with their
 * garbage up to four times what is alive before it is collected. At 100 (2×) a 100,000-row import
 * grew the process by 25 MB instead of 110–125, at the same speed (docs/performance.md).
 * The factor is read at each collection, so setting it as a process starts is enough.
 */
export function applyHeapGrowth(percent: number): void {
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
