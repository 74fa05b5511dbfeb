import { monotonicFactory } from 'ulid';

const nextUlid = monotonicFactory();

export type IdPrefix =
  | 'acc'
  | 'key'
  | 'con'
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
  | 'vis';

/** A prefixed id whose text order is its creation order (ULID, monotonic within a process). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${nextUlid()}`;
}
