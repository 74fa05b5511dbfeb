import { describe, expect, it } from 'vitest';
import { Batcher } from '../../src/db/batcher.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A Batcher used as a group writer: the function sees each batch, every item resolves empty. */
function writerOf(write: (items: number[]) => Promise<void>, maxBatch?: number) {
  return new Batcher<number, void>(
    async (items) => {
      await write(items);
      return [];
    },
    { maxBatch },
  );
}

describe('Batcher', () => {
  it('writes a lone item at once and groups the items that arrive while a write is in flight', async () => {
    const writes: number[][] = [];
    const gates: Array<ReturnType<typeof deferred>> = [];
    const writer = writerOf((items) => {
      writes.push(items);
      const gate = deferred();
      gates.push(gate);
      return gate.promise;
    });
    const first = writer.submit(1);
    expect(writes).toEqual([[1]]);
    const rest = [writer.submit(2), writer.submit(3), writer.submit(4)];
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
    const writer = writerOf(async (items) => {
      writes.push(items);
      if (writes.length === 1) await blocked;
    }, 2);
    const all = [1, 2, 3, 4, 5].map((n) => writer.submit(n));
    release();
    await Promise.all(all);
    expect(writes).toEqual([[1], [2, 3], [4, 5]]);
  });

  it('a failed batch runs its items again one by one: only the item that fails is rejected', async () => {
    const writes: number[][] = [];
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const writer = writerOf(async (items) => {
      writes.push(items);
      if (writes.length === 1) await blocked;
      if (items.includes(2)) throw new Error('write failed');
    });
    const first = writer.submit(1);
    const second = writer.submit(2);
    const third = writer.submit(3);
    release();
    await expect(first).resolves.toBeUndefined();
    await expect(second).rejects.toThrow('write failed');
    await expect(third).resolves.toBeUndefined();
    await expect(writer.submit(4)).resolves.toBeUndefined();
    expect(writes).toEqual([[1], [2, 3], [2], [3], [4]]);
  });

  it('resolves each call with its own result, in batches, with up to maxConcurrent batches in flight', async () => {
    const batches: number[][] = [];
    const gates: Array<ReturnType<typeof deferred>> = [];
    const batcher = new Batcher<number, number>(
      async (items) => {
        batches.push(items);
        const gate = deferred();
        gates.push(gate);
        await gate.promise;
        return items.map((n) => n * 10);
      },
      { maxConcurrent: 2 },
    );
    const calls = [1, 2, 3, 4, 5].map((n) => batcher.submit(n));
    // Two lone calls start at once (two slots); the rest wait for a slot and go together.
    expect(batches).toEqual([[1], [2]]);
    gates[0]!.resolve();
    await calls[0];
    await Promise.resolve();
    expect(batches).toEqual([[1], [2], [3, 4, 5]]);
    gates[1]!.resolve();
    gates[2]!.resolve();
    expect(await Promise.all(calls)).toEqual([10, 20, 30, 40, 50]);
  });
});
