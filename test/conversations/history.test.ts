import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import {
  createContact,
  expectError,
  expectStatus,
  freezeClock,
  receive,
  sendText,
} from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  freezeClock(t.clock);
});
afterAll(() => t.close());

interface Page {
  data: { id: string; direction: string; content: string | null; created_at: string }[];
  has_more: boolean;
}

const history = (acc: TestAccount, conversationId: string, query = '') =>
  acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}/messages${query}` });

/** A webchat conversation of `count` messages, alternating in and out; some share a millisecond. */
async function conversationOf(acc: TestAccount, count: number) {
  const contact = await createContact(acc);
  let conversationId = '';
  for (let i = 0; i < count; i++) {
    // Every third message lands in the same millisecond as the one before it.
    if (i % 3 !== 2) t.clock.advance(1);
    if (i % 2 === 0) {
      conversationId = (await receive(acc, contact.id, 'webchat', `in ${i}`)).conversation_id;
    } else {
      const res = await sendText(acc, contact.id, 'webchat', `out ${i}`);
      expectStatus(res, 201);
    }
  }
  return conversationId;
}

describe('GET /v1/conversations/{id}/messages', () => {
  let acc: TestAccount;
  let conversationId: string;
  let all: string[];
  beforeAll(async () => {
    acc = await newAccount(t);
    conversationId = await conversationOf(acc, 7);
    const full = await acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}` });
    all = full.json().messages.map((m: { id: string }) => m.id);
    expect(all).toHaveLength(7);
  });

  it('pages newest first; each page continues before the last one, and the pages cover the history once', async () => {
    const seen: string[] = [];
    const sizes: number[] = [];
    let before = '';
    for (;;) {
      const res = await history(acc, conversationId, `?limit=3${before}`);
      expectStatus(res, 200);
      const page = res.json<Page>();
      sizes.push(page.data.length);
      seen.push(...page.data.map((m) => m.id));
      if (!page.has_more) break;
      before = `&before=${page.data[page.data.length - 1]!.id}`;
    }
    expect(sizes).toEqual([3, 3, 1]);
    expect(seen).toEqual([...all].reverse());
  });

  it('answers the messages as the conversation read shows them', async () => {
    const full = await acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}` });
    const page = (await history(acc, conversationId)).json<Page>();
    expect(page.has_more).toBe(false);
    expect(page.data).toEqual([...full.json().messages].reverse());
  });

  it('takes 50 by default and at most 100', async () => {
    const long = await conversationOf(acc, 52);
    const first = (await history(acc, long)).json<Page>();
    expect(first.data).toHaveLength(50);
    expect(first.has_more).toBe(true);
    const all100 = (await history(acc, long, '?limit=100')).json<Page>();
    expect(all100.data).toHaveLength(52);
    expect(all100.has_more).toBe(false);
    const rest = (await history(acc, long, `?before=${first.data[49]!.id}`)).json<Page>();
    expect(rest.data.map((m) => m.id)).toEqual(all100.data.slice(50).map((m) => m.id));
    expect(rest.has_more).toBe(false);
  });

  it('refuses a limit outside 1–100, page, and unknown parameters with a 422', async () => {
    for (const query of ['?limit=0', '?limit=101', '?limit=ten', '?page=2', '?cursor=x'])
      expectError(await history(acc, conversationId, query), 422);
  });

  it('is a 404 for a before that is not a message of this conversation, and for another account', async () => {
    const other = await conversationOf(acc, 1);
    const otherMessage = (await history(acc, other)).json<Page>().data[0]!.id;
    expectError(await history(acc, conversationId, `?before=${otherMessage}`), 404);
    expectError(await history(acc, conversationId, '?before=msg_00000000000000000000000000'), 404);
    expectError(await history(acc, 'conv_00000000000000000000000000'), 404);
    const stranger = await newAccount(t);
    expectError(await history(stranger, conversationId), 404);
    const theirs = await conversationOf(stranger, 1);
    const theirMessage = (await history(stranger, theirs)).json<Page>().data[0]!.id;
    expectError(await history(acc, conversationId, `?before=${theirMessage}`), 404);
  });
});
