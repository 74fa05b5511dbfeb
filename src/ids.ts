import { randomFillSync } from 'node:crypto';
import { monotonicFactory } from 'ulid';

/**
 * Uniform numbers in [0, 1) from the system's CSPRNG, drawn 1,024 at a time: ULID's own source
 * makes one system call per random character (16 per id), a cost a busy send path noticed.
 */
const pool = new Uint32Array(1024);
let used = pool.length;
function pooledRandom(): number {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  return pool[used++]! / 0x1_0000_0000;
}

const nextUlid = monotonicFactory(pooledRandom);

export type IdPrefix =
  | 'acc'
  | 'key'
  | 'con'
  | 'imp'
  | 'conv'
  | 'msg'
  | 'note'
  | 'bc'
  | 'wh'
  | 'evt'
  | 'usr'
  | 'team'
  | 'tpl'
  | 'job'
  | 'dlv'
  | 'chn'
  | 'iwh'
  | 'med'
  | 'vis'
  | 'cr';

/** A prefixed id whose text order is its creation order (ULID, monotonic within a process). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}
