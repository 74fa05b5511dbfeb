import { decodeTime } from 'ulid';
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';

describe('newId', () => {
  it('is the prefix and a ULID, unique and in creation order across many ids', () => {
    const ids = Array.from({ length: 5_000 }, () => newId('msg'));
    for (const id of ids) expect(id).toMatch(/^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    const t = decodeTime(ids[0]!.slice(4));
    expect(Math.abs(t - Date.now())).toBeLessThan(60_000);
  });

  it('draws its random part evenly: every ULID character appears in first random positions', () => {
    // Ids made in different milliseconds start a fresh random part; their first random
    // character (position 10 of the ULID) must range over all 32 symbols.
    const seen = new Set<string>();
    for (let i = 0; i < 3_000 && seen.size < 32; i++) {
      const id = newId('con');
      seen.add(id.slice(4 + 10, 4 + 11));
      const until = Date.now() + 1;
      while (Date.now() < until);
    }
    expect(seen.size).toBe(32);
  });
});
