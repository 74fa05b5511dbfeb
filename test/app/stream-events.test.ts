// The app asks the event stream for the types it reads (`?events=`), and the server refuses a
// type it does not know: the app's two lists must follow the server's.
import { describe, expect, it } from 'vitest';
import { COMING_EVENTS, STREAM_EVENTS } from '../../app/src/modules/live/stream-events.js';
import { STREAM_EVENT_TYPES } from '../../src/events/event-types.js';

describe("the app's event types", () => {
  const known = new Set<string>(STREAM_EVENT_TYPES);

  it('asks only for types the server knows', () => {
    expect(STREAM_EVENTS.filter((t) => !known.has(t))).toEqual([]);
  });

  it('asks for every type it handles once the server knows it (move it from COMING_EVENTS)', () => {
    expect(COMING_EVENTS.filter((t) => known.has(t))).toEqual([]);
  });
});
