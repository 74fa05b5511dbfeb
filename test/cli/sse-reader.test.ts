import { describe, expect, it } from 'vitest';
import { SseReader } from '../../src/cli/sse-reader.js';

describe('SseReader', () => {
  it('returns each message once a blank line completes it, across chunks and line endings', () => {
    const reader = new SseReader();
    expect(reader.push('retry: 2000\n\n: keep-alive\n\nid: evt_1\nevent: contact.cre')).toEqual([]);
    expect(reader.push('ated\ndata: {"a":1}\r')).toEqual([]);
    expect(reader.push('\n\r\nid: evt_2\r\nevent: x\r\ndata:b\r\ndata: c\r\n\r\n')).toEqual([
      { id: 'evt_1', event: 'contact.created', data: '{"a":1}' },
      { id: 'evt_2', event: 'x', data: 'b\nc' },
    ]);
  });

  it("returns an id with no data (the stream's start) with empty data and no event, so its place is kept", () => {
    const reader = new SseReader();
    expect(reader.push('retry: 2000\nid: pos_812_0\n\n: keep-alive\n\n')).toEqual([
      { id: 'pos_812_0', data: '' },
    ]);
  });

  it('never returns a message cut off before its blank line', () => {
    const reader = new SseReader();
    expect(reader.push('id: evt_3\nevent: x\ndata: {"half"')).toEqual([]);
    // A new connection gets a new reader: the half message is gone with the old one.
    expect(new SseReader().push('event: end\ndata: {"reason":"revoked"}\n\n')).toEqual([
      { id: undefined, event: 'end', data: '{"reason":"revoked"}' },
    ]);
  });
});
