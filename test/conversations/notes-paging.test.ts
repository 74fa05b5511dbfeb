import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import {
  createContact,
  expectError,
  expectStatus,
  freezeClock,
  receive,
} from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  freezeClock(t.clock);
});
afterAll(() => t.close());

interface Note {
  id: string;
  content: string;
}

const notes = (acc: TestAccount, conversationId: string, query = '') =>
  acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}/notes${query}` });

/** A conversation with `count` notes; every third shares a millisecond with the one before. */
async function conversationWithNotes(acc: TestAccount, count: number) {
  const contact = await createContact(acc);
  const { conversation_id: id } = await receive(acc, contact.id, 'webchat', 'hi');
  const written: Note[] = [];
  for (let i = 0; i < count; i++) {
    if (i % 3 !== 2) t.clock.advance(1);
    const res = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${id}/notes`,
      payload: { content: `note ${i}` },
    });
    expectStatus(res, 201);
    written.push(res.json());
  }
  return { id: id as string, written };
}

describe('GET /v1/conversations/{id}/notes?before=', () => {
  it('walks every note newest first by before, with has_more, none twice or missed', async () => {
    const acc = await newAccount(t);
    const { id, written } = await conversationWithNotes(acc, 12);
    const seen: Note[] = [];
    // A client holds the newest note and pages back from it.
    let before = written[written.length - 1]!.id;
    seen.push(written[written.length - 1]!);
    for (;;) {
      const res = await notes(acc, id, `?before=${before}&limit=5`);
      expectStatus(res, 200);
      const page = res.json<{ data: Note[]; has_more: boolean }>();
      expect(Object.keys(page).sort()).toEqual(['data', 'has_more']);
      seen.push(...page.data);
      if (!page.has_more) break;
      expect(page.data).toHaveLength(5);
      before = page.data[page.data.length - 1]!.id;
    }
    expect(seen.map((n) => n.content)).toEqual([...written].reverse().map((n) => n.content));
  });

  it('limit defaults to 50 with before; the oldest note has nothing before it', async () => {
    const acc = await newAccount(t);
    const { id, written } = await conversationWithNotes(acc, 3);
    const res = await notes(acc, id, `?before=${written[2]!.id}`);
    expect(res.json()).toEqual({ data: [written[1], written[0]], has_more: false });
    expect((await notes(acc, id, `?before=${written[0]!.id}`)).json()).toEqual({
      data: [],
      has_more: false,
    });
  });

  it('without before the answer is as it was: a page, oldest first', async () => {
    const acc = await newAccount(t);
    const { id, written } = await conversationWithNotes(acc, 3);
    expect((await notes(acc, id)).json()).toEqual({ data: written, total: 3, page: 1 });
    expect((await notes(acc, id, '?page=2&limit=2')).json()).toEqual({
      data: [written[2]],
      total: 3,
      page: 2,
    });
  });

  it('a before of another conversation, or unknown, is a 404; page with before a 422', async () => {
    const acc = await newAccount(t);
    const a = await conversationWithNotes(acc, 2);
    const b = await conversationWithNotes(acc, 2);
    const other = await newAccount(t);
    const c = await conversationWithNotes(other, 1);
    for (const bad of [b.written[0]!.id, c.written[0]!.id, 'note_nope']) {
      const error = expectError(await notes(acc, a.id, `?before=${bad}`), 404);
      expect(error.message).toBe(`note ${bad} not found`);
    }
    expectError(await notes(acc, a.id, `?before=${a.written[1]!.id}&page=1`), 422, 'page');
    expectError(await notes(acc, a.id, `?before=${a.written[1]!.id}&limit=101`), 422, 'limit');
    expectError(await notes(other, a.id, `?before=${a.written[1]!.id}`), 404);
  });
});
