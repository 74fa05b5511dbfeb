import { describe, expect, it } from 'vitest';
import { GroupWriter } from '../../src/db/group-writer.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('GroupWriter', () => {
  it('writes a lone item at once and groups the items that arrive while a write is in flight', async () => {
    const writes: number[][] = [];
    const gates: Array<ReturnType<typeof deferred>> = [];
    const writer = new GroupWriter<number>((items) => {
      writes.push(items);
      const gate = deferred();
      gates.push(gate);
      return gate.promise;
    });
    const first = writer.add(1);
    expect(writes).toEqual([[1]]);
    const rest = [writer.add(2), writer.add(3), writer.add(4)];
    expect(writes).toHaveLength(1);
    gates[0]!.resolve();
    await first;
    await Promise.resolve();
    expect(writes).toEqual([[1], [2, 3, 4]]);
    gates[1]!.resolve();
    await Promise.all(rest);
  });

  it('caps a write at maxBatch items', async () => {
    const writes: number[][] = [];
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const writer = new GroupWriter<number>(async (items) => {
      writes.push(items);
      if (writes.length === 1) await blocked;
    }, 2);
    const all = [1, 2, 3, 4, 5].map((n) => writer.add(n));
    release();
    await Promise.all(all);
    expect(writes).toEqual([[1], [2, 3], [4, 5]]);
  });

  it('a failed write rejects its own items only, and later items are still written', async () => {
    const writes: number[][] = [];
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const writer = new GroupWriter<number>(async (items) => {
      writes.push(items);
      if (writes.length === 1) await blocked;
      if (items.includes(2)) throw new Error('write failed');
    });
    const first = writer.add(1);
    const second = writer.add(2);
    const third = writer.add(3);
    release();
    await expect(first).resolves.toBeUndefined();
    await expect(second).rejects.toThrow('write failed');
    await expect(third).rejects.toThrow('write failed');
    await expect(writer.add(4)).resolves.toBeUndefined();
    expect(writes).toEqual([[1], [2, 3], [4]]);
  });
});
