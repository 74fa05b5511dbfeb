import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import {
  createContact,
  createUser,
  eventsOf,
  expectError,
  expectStatus,
  freezeClock,
  receive,
  sendText,
} from '../inbox-helpers.js';
import { signedInUser } from '../users/session-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  // Activity order must not depend on two requests landing in the same millisecond.
  freezeClock(t.clock);
});
afterAll(() => t.close());

/** A new conversation (webchat unless told), one second after the previous activity. */
async function conversation(
  acc: TestAccount,
  channel = 'webchat',
): Promise<{ id: string; contactId: string }> {
  t.clock.advance(1000);
  const contact = await createContact(acc);
  if (channel === 'webchat') {
    const res = await sendText(acc, contact.id, channel, 'hello');
    expectStatus(res, 201);
    return { id: res.json().conversation_id, contactId: contact.id };
  }
  const m = await receive(acc, contact.id, channel);
  return { id: m.conversation_id, contactId: contact.id };
}
const list = (acc: TestAccount, query = '') =>
  acc.call({ method: 'GET', url: `/v1/conversations${query}` });
const ids = (res: { json(): { data: { id: string }[] } }) => res.json().data.map((c) => c.id);
const resolve = (acc: TestAccount, id: string) =>
  acc.call({ method: 'POST', url: `/v1/conversations/${id}/resolve` });
const assign = (acc: TestAccount, id: string, payload: Record<string, unknown>) =>
  acc.call({ method: 'POST', url: `/v1/conversations/${id}/assign`, payload });
async function createTeam(acc: TestAccount, name: string, userIds: string[] = []) {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/teams',
    payload: { name, user_ids: userIds },
  });
  expectStatus(res, 201);
  return res.json<{ id: string; name: string }>();
}

describe('GET /v1/conversations: filters', () => {
  let acc: TestAccount;
  let open1: string, open2: string, done: string;
  beforeAll(async () => {
    acc = await newAccount(t);
    open1 = (await conversation(acc)).id;
    done = (await conversation(acc, 'whatsapp')).id;
    open2 = (await conversation(acc, 'whatsapp')).id;
    t.clock.advance(1000);
    expectStatus(await resolve(acc, done), 200);
  });

  it('lists only open conversations by default', async () => {
    const res = await list(acc);
    expectStatus(res, 200);
    expect(res.json()).toMatchObject({ total: 2, page: 1 });
    expect(ids(res)).toEqual([open2, open1]);
    expect(ids(await list(acc, '?status=open'))).toEqual([open2, open1]);
  });

  it('status=resolved lists only resolved ones', async () => {
    const res = await list(acc, '?status=resolved');
    expect(res.json()).toMatchObject({ total: 1, page: 1 });
    expect(ids(res)).toEqual([done]);
    expect(res.json().data[0].status).toBe('resolved');
  });

  it('status=all lists both', async () => {
    const res = await list(acc, '?status=all');
    expect(res.json().total).toBe(3);
    expect(ids(res)).toEqual([done, open2, open1]);
  });

  it('channel filters by channel (combined with status)', async () => {
    expect(ids(await list(acc, '?channel=whatsapp'))).toEqual([open2]);
    expect(ids(await list(acc, '?channel=whatsapp&status=all'))).toEqual([done, open2]);
    expect(ids(await list(acc, '?channel=webchat'))).toEqual([open1]);
    const none = await list(acc, '?channel=instagram');
    expect(none.json()).toEqual({ data: [], total: 0, page: 1 });
  });

  it('assigned_to filters by a user id or a team id', async () => {
    const other = await newAccount(t);
    const a = (await conversation(other)).id;
    const b = (await conversation(other)).id;
    await conversation(other);
    const user = await createUser(other, 'Alice');
    const team = await createTeam(other, 'Billing');
    expectStatus(await assign(other, a, { user_id: user.id }), 200);
    expectStatus(await assign(other, b, { team_id: team.id }), 200);
    expect(ids(await list(other, `?assigned_to=${user.id}`))).toEqual([a]);
    expect(ids(await list(other, `?assigned_to=${team.id}`))).toEqual([b]);
    expect((await list(other, '?assigned_to=usr_00000000000000000000000000')).json().total).toBe(0);
  });

  it('view=unassigned lists those assigned to nobody, view=all every one; contact_id narrows to one contact; sort=last_activity is the order', async () => {
    const other = await newAccount(t);
    const a = await conversation(other);
    const b = await conversation(other);
    const c = await conversation(other, 'whatsapp');
    const user = await createUser(other, 'Alice');
    t.clock.advance(1000);
    // Assigning is activity: b moves to the top.
    expectStatus(await assign(other, b.id, { user_id: user.id }), 200);
    expect(ids(await list(other, '?view=unassigned'))).toEqual([c.id, a.id]);
    expect(ids(await list(other, '?view=all'))).toEqual(ids(await list(other)));
    expect(ids(await list(other, '?view=all&sort=last_activity'))).toEqual([b.id, c.id, a.id]);
    expect(ids(await list(other, `?contact_id=${a.contactId}`))).toEqual([a.id]);
    expect(ids(await list(other, `?view=unassigned&contact_id=${b.contactId}`))).toEqual([]);
    expect((await list(other, '?contact_id=con_00000000000000000000000000')).json().total).toBe(0);
  });

  it('view=mine needs a signed-in user: with an API key it is a 422', async () => {
    expectError(await list(acc, '?view=mine'), 422, 'view');
    expectError(await list(acc, '?view=everyone'), 422, 'view');
  });

  it('an invalid status, channel or unknown query parameter is a 422 naming it', async () => {
    expectError(await list(acc, '?status=closed'), 422, 'status');
    expectError(await list(acc, '?channel=sms'), 422, 'channel');
    expectError(await list(acc, '?sort=asc'), 422, 'sort');
    expectError(await list(acc, '?limit=101'), 422, 'limit');
    expectError(await list(acc, '?page=0'), 422, 'page');
  });
});

describe('GET /v1/conversations: pages and order', () => {
  it('pages through every conversation once, most recent activity first', async () => {
    const acc = await newAccount(t);
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push((await conversation(acc)).id);
    const newestFirst = [...created].reverse();
    const pages = [];
    for (const page of [1, 2, 3]) {
      const res = await list(acc, `?limit=2&page=${page}`);
      expectStatus(res, 200);
      expect(res.json()).toMatchObject({ total: 5, page });
      pages.push(ids(res));
    }
    expect(pages).toEqual([newestFirst.slice(0, 2), newestFirst.slice(2, 4), newestFirst.slice(4)]);
    expect((await list(acc, '?limit=2&page=4')).json()).toEqual({ data: [], total: 5, page: 4 });
  });

  it('a conversation with a new message moves to the top (outbound or inbound)', async () => {
    const acc = await newAccount(t);
    const a = await conversation(acc);
    const b = await conversation(acc);
    const c = await conversation(acc);
    expect(ids(await list(acc))).toEqual([c.id, b.id, a.id]);
    t.clock.advance(1000);
    expectStatus(await sendText(acc, a.contactId, 'webchat', 'news'), 201);
    expect(ids(await list(acc))).toEqual([a.id, c.id, b.id]);
    t.clock.advance(1000);
    await receive(acc, b.contactId, 'webchat');
    const res = await list(acc);
    expect(ids(res)).toEqual([b.id, a.id, c.id]);
    expect(res.json().data[0].updated_at).toBe(t.clock.now().toISOString());
  });

  it('ties in activity time are broken by id, so pages never overlap', async () => {
    const acc = await newAccount(t);
    t.clock.advance(1000);
    const made: string[] = [];
    for (let i = 0; i < 4; i++) {
      const contact = await createContact(acc);
      made.push((await sendText(acc, contact.id)).json().conversation_id);
    }
    const seen = [
      ...ids(await list(acc, '?limit=3&page=1')),
      ...ids(await list(acc, '?limit=3&page=2')),
    ];
    expect(new Set(seen).size).toBe(4);
    expect(new Set(seen)).toEqual(new Set(made));
  });
});

describe('conversation shapes', () => {
  it('GET returns every message oldest first; list, assign and resolve carry messages: []', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    t.clock.advance(1000);
    const first = await receive(acc, contact.id, 'whatsapp', 'question');
    t.clock.advance(1000);
    const second = (await sendText(acc, contact.id, 'whatsapp', 'answer')).json();
    t.clock.advance(1000);
    const third = await receive(acc, contact.id, 'whatsapp', 'thanks');
    const convId = first.conversation_id;

    const got = await acc.call({ method: 'GET', url: `/v1/conversations/${convId}` });
    expectStatus(got, 200);
    expect(got.json()).toMatchObject({
      id: convId,
      contact_id: contact.id,
      channel: 'whatsapp',
      status: 'open',
      assigned_to: null,
    });
    expect(got.json().id).toMatch(/^conv_/);
    expect(got.json().messages).toEqual([first, second, third]);

    const listed = await list(acc);
    expect(listed.json().data).toEqual([{ ...got.json(), messages: [] }]);
    const user = await createUser(acc);
    const assigned = await assign(acc, convId, { user_id: user.id });
    expect(assigned.json().messages).toEqual([]);
    const resolved = await resolve(acc, convId);
    expect(resolved.json().messages).toEqual([]);
  });

  it('an unknown conversation is a 404', async () => {
    const acc = await newAccount(t);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/conversations/conv_00000000000000000000000000' }),
      404,
    );
  });
});

describe('POST /v1/conversations/{id}/assign', () => {
  it('assigning to a user fills assigned_to with the user name and emits conversation.assigned with the response', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const user = await createUser(acc, 'Grace Hopper');
    const res = await assign(acc, id, { user_id: user.id });
    expectStatus(res, 200);
    expect(res.json()).toMatchObject({
      id,
      status: 'open',
      assigned_to: { type: 'user', id: user.id, name: 'Grace Hopper' },
    });
    const events = await eventsOf(t.db, acc.accountId, 'conversation.assigned');
    expect(events).toEqual([
      { type: 'conversation.assigned', data: { ...res.json(), actor: null } },
    ]);
    const got = await acc.call({ method: 'GET', url: `/v1/conversations/${id}` });
    expect(got.json().assigned_to).toEqual({ type: 'user', id: user.id, name: 'Grace Hopper' });
  });

  it('assigning to a team fills assigned_to with the team name; reassigning replaces it', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const user = await createUser(acc, 'Ada');
    const team = await createTeam(acc, 'Support EU', [user.id]);
    expect((await assign(acc, id, { user_id: user.id })).json().assigned_to.type).toBe('user');
    const res = await assign(acc, id, { team_id: team.id });
    expectStatus(res, 200);
    expect(res.json().assigned_to).toEqual({ type: 'team', id: team.id, name: 'Support EU' });
    expect(
      (await eventsOf(t.db, acc.accountId, 'conversation.assigned')).map((e) => e.data),
    ).toEqual([
      expect.objectContaining({ assigned_to: { type: 'user', id: user.id, name: 'Ada' } }),
      { ...res.json(), actor: null },
    ]);
  });

  it('both user_id and team_id, or neither, is a 422 and changes nothing', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const user = await createUser(acc);
    const team = await createTeam(acc, 'Sales');
    expectError(await assign(acc, id, { user_id: user.id, team_id: team.id }), 422);
    expectError(await assign(acc, id, {}), 422);
    expectError(await assign(acc, id, { agent_id: user.id }), 422, 'agent_id');
    expect(
      (await acc.call({ method: 'GET', url: `/v1/conversations/${id}` })).json().assigned_to,
    ).toBeNull();
    expect(await eventsOf(t.db, acc.accountId, 'conversation.assigned')).toEqual([]);
  });

  it('an unknown user or team is a 404 naming it', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    expect(
      expectError(await assign(acc, id, { user_id: 'usr_00000000000000000000000000' }), 404)
        .message,
    ).toContain('usr_00000000000000000000000000');
    expect(
      expectError(await assign(acc, id, { team_id: 'team_00000000000000000000000000' }), 404)
        .message,
    ).toContain('team_00000000000000000000000000');
    expectError(
      await assign(acc, 'conv_00000000000000000000000000', { user_id: (await createUser(acc)).id }),
      404,
    );
    expect(await eventsOf(t.db, acc.accountId, 'conversation.assigned')).toEqual([]);
  });

  it('assigning a resolved conversation reopens it', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    expect((await resolve(acc, id)).json().status).toBe('resolved');
    const user = await createUser(acc);
    const res = await assign(acc, id, { user_id: user.id });
    expect(res.json().status).toBe('open');
    expect(ids(await list(acc))).toEqual([id]);
  });
});

describe('POST /v1/conversations/{id}/resolve', () => {
  it('resolves, emits conversation.resolved with the response once; resolving again is 200 with no second event', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const first = await resolve(acc, id);
    expectStatus(first, 200);
    expect(first.json()).toMatchObject({ id, status: 'resolved' });
    const again = await resolve(acc, id);
    expectStatus(again, 200);
    expect(again.json()).toEqual(first.json());
    expect(await eventsOf(t.db, acc.accountId, 'conversation.resolved')).toEqual([
      { type: 'conversation.resolved', data: { ...first.json(), actor: null } },
    ]);
    expect(ids(await list(acc))).toEqual([]);
  });

  it('an unknown conversation is a 404', async () => {
    const acc = await newAccount(t);
    expectError(await resolve(acc, 'conv_00000000000000000000000000'), 404);
  });
});

describe('POST /v1/conversations/{id}/reopen and /unassign', () => {
  const reopen = (acc: TestAccount, id: string) =>
    acc.call({ method: 'POST', url: `/v1/conversations/${id}/reopen` });
  const unassign = (acc: TestAccount, id: string) =>
    acc.call({ method: 'POST', url: `/v1/conversations/${id}/unassign` });

  it('reopen opens a resolved conversation with conversation.reopened; an open one is answered as it is, with no event', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const open = await reopen(acc, id);
    expectStatus(open, 200);
    expect(open.json()).toMatchObject({ id, status: 'open' });
    expect(await eventsOf(t.db, acc.accountId, 'conversation.reopened')).toEqual([]);
    expectStatus(await resolve(acc, id), 200);
    t.clock.advance(1000);
    const reopened = await reopen(acc, id);
    expectStatus(reopened, 200);
    expect(reopened.json()).toMatchObject({ id, status: 'open', messages: [] });
    expect(Date.parse(reopened.json().updated_at)).toBeGreaterThan(
      Date.parse(open.json().updated_at),
    );
    expect(await eventsOf(t.db, acc.accountId, 'conversation.reopened')).toEqual([
      { type: 'conversation.reopened', data: { ...reopened.json(), actor: null } },
    ]);
    expect(ids(await list(acc))).toEqual([id]);
  });

  it('unassign removes the assignee with conversation.unassigned, once; the status stays', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const user = await createUser(acc);
    expectStatus(await assign(acc, id, { user_id: user.id }), 200);
    expectStatus(await resolve(acc, id), 200);
    const first = await unassign(acc, id);
    expectStatus(first, 200);
    expect(first.json()).toMatchObject({ id, status: 'resolved', assigned_to: null });
    const again = await unassign(acc, id);
    expect(again.json()).toEqual(first.json());
    expect(await eventsOf(t.db, acc.accountId, 'conversation.unassigned')).toEqual([
      { type: 'conversation.unassigned', data: { ...first.json(), actor: null } },
    ]);
  });

  it("an unknown conversation, or another account's, is a 404", async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const stranger = await newAccount(t);
    for (const act of [reopen, unassign]) {
      expectError(await act(acc, 'conv_00000000000000000000000000'), 404);
      expectError(await act(stranger, id), 404);
    }
  });
});

describe('GET /v1/conversations/counts', () => {
  const counts = async (acc: TestAccount, query = '') => {
    const res = await acc.call({ method: 'GET', url: `/v1/conversations/counts${query}` });
    expectStatus(res, 200);
    return res.json();
  };

  it('counts open conversations, and the unassigned among them; mine is null for an API key', async () => {
    const acc = await newAccount(t);
    expect(await counts(acc)).toEqual({ mine: null, unassigned: 0, all: 0 });
    const a = await conversation(acc);
    const b = await conversation(acc);
    const c = await conversation(acc, 'whatsapp');
    await conversation(acc, 'whatsapp');
    const user = await createUser(acc);
    expectStatus(await assign(acc, a.id, { user_id: user.id }), 200);
    expectStatus(await resolve(acc, b.id), 200);
    expectStatus(await assign(acc, c.id, { user_id: user.id }), 200);
    expect(await counts(acc)).toEqual({ mine: null, unassigned: 1, all: 3 });
    expect(await counts(acc, '?channel=whatsapp')).toEqual({ mine: null, unassigned: 1, all: 2 });
    expect(await counts(acc, '?channel=webchat')).toEqual({ mine: null, unassigned: 0, all: 1 });
    // Another account's conversations never count.
    expect(await counts(await newAccount(t))).toEqual({ mine: null, unassigned: 0, all: 0 });
  });

  it('an unknown channel or query parameter is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/conversations/counts?channel=fax' }),
      422,
    );
    expectError(await acc.call({ method: 'GET', url: '/v1/conversations/counts?view=all' }), 422);
  });
});

describe('notes', () => {
  it('POST answers 201 with a note_ id; GET lists notes oldest first; notes are not messages', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const eventsBefore = await eventsOf(t.db, acc.accountId);
    t.clock.advance(1000);
    const a = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${id}/notes`,
      payload: { content: 'VIP customer' },
    });
    expectStatus(a, 201);
    expect(a.json()).toEqual({
      id: expect.stringMatching(/^note_/),
      conversation_id: id,
      content: 'VIP customer',
      author: null,
      created_at: t.clock.now().toISOString(),
    });
    t.clock.advance(1000);
    const b = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${id}/notes`,
      payload: { content: 'asked for a refund' },
    });
    expectStatus(b, 201);

    const notes = await acc.call({ method: 'GET', url: `/v1/conversations/${id}/notes` });
    expectStatus(notes, 200);
    expect(notes.json()).toEqual({ data: [a.json(), b.json()], total: 2, page: 1 });

    const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${id}` });
    expect(conv.json().messages.map((m: { content: string }) => m.content)).toEqual(['hello']);
    // Each note has its note.created, the note as answered (an API key's: actor null).
    expect(await eventsOf(t.db, acc.accountId)).toEqual([
      ...eventsBefore,
      { type: 'note.created', data: { ...a.json(), actor: null } },
      { type: 'note.created', data: { ...b.json(), actor: null } },
    ]);
  });

  it('note.created is written in the transaction of the note; through a session it carries the user', async () => {
    const acc = await newAccount(t);
    const { id } = await conversation(acc);
    const user = await signedInUser(t, acc, { name: 'Noa' });
    const hook = await acc.call({
      method: 'POST',
      url: '/v1/webhooks',
      payload: { url: 'https://127.0.0.1:9/hook', events: ['note.created'] },
    });
    expectStatus(hook, 201);
    const res = await user.call({
      method: 'POST',
      url: `/v1/conversations/${id}/notes`,
      payload: { content: 'called back' },
    });
    expectStatus(res, 201);
    const actor = { type: 'user', id: user.userId, name: 'Noa' };
    expect(res.json().author).toEqual(actor);
    expect(await eventsOf(t.db, acc.accountId, 'note.created')).toEqual([
      { type: 'note.created', data: { ...res.json(), actor } },
    ]);
    // Rows written by one transaction carry its id as xmin.
    const { rows } = await sql<{ table: string; x: string }>`
      SELECT 'notes' AS table, xmin::text AS x FROM notes
      WHERE account_id = ${acc.accountId} AND id = ${res.json().id}
      UNION ALL
      SELECT 'events', xmin::text FROM events
      WHERE account_id = ${acc.accountId} AND type = 'note.created'`.execute(t.db);
    expect(rows).toHaveLength(2);
    expect(rows[0]!.x).toBe(rows[1]!.x);
    // And its delivery to the webhook subscribed to it.
    const deliveries = await t.db
      .selectFrom('webhook_deliveries')
      .select(['webhook_id', 'event_type'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(deliveries).toEqual([{ webhook_id: hook.json().id, event_type: 'note.created' }]);
  });

  it('a note refused (unknown conversation, empty content) writes no note.created', async () => {
    const acc = await newAccount(t);
    const note = (conversationId: string, content: string) =>
      acc.call({
        method: 'POST',
        url: `/v1/conversations/${conversationId}/notes`,
        payload: { content },
      });
    expectStatus(await note('conv_missing', 'x'), 404);
    const { id } = await conversation(acc);
    expectStatus(await note(id, ''), 422);
    expect(await eventsOf(t.db, acc.accountId, 'note.created')).toEqual([]);
  });

  it('notes of an unknown conversation are a 404; empty content is a 422', async () => {
    const acc = await newAccount(t);
    const missing = 'conv_00000000000000000000000000';
    expectError(
      await acc.call({
        method: 'POST',
        url: `/v1/conversations/${missing}/notes`,
        payload: { content: 'x' },
      }),
      404,
    );
    expectError(await acc.call({ method: 'GET', url: `/v1/conversations/${missing}/notes` }), 404);
    const { id } = await conversation(acc);
    expectError(
      await acc.call({ method: 'POST', url: `/v1/conversations/${id}/notes`, payload: {} }),
      422,
      'content',
    );
    expectError(
      await acc.call({
        method: 'POST',
        url: `/v1/conversations/${id}/notes`,
        payload: { content: '' },
      }),
      422,
      'content',
    );
  });
});

describe('account isolation', () => {
  it("another account gets 404 for a conversation, its notes, assign, resolve and its messages' sandbox status", async () => {
    const owner = await newAccount(t);
    const intruder = await newAccount(t);
    const contact = await createContact(owner);
    const message = (await sendText(owner, contact.id)).json();
    const id = message.conversation_id;
    await owner.call({
      method: 'POST',
      url: `/v1/conversations/${id}/notes`,
      payload: { content: 'secret' },
    });
    const intruderUser = await createUser(intruder);

    expectError(await intruder.call({ method: 'GET', url: `/v1/conversations/${id}` }), 404);
    expectError(await intruder.call({ method: 'GET', url: `/v1/conversations/${id}/notes` }), 404);
    expectError(
      await intruder.call({
        method: 'POST',
        url: `/v1/conversations/${id}/notes`,
        payload: { content: 'x' },
      }),
      404,
    );
    expectError(await assign(intruder, id, { user_id: intruderUser.id }), 404);
    expectError(await resolve(intruder, id), 404);
    expectError(
      await intruder.call({
        method: 'POST',
        url: `/v1/sandbox/messages/${message.id}/status`,
        payload: { status: 'read' },
      }),
      404,
    );
    expectError(await sendText(intruder, contact.id), 404);
    expect((await list(intruder, '?status=all')).json()).toEqual({ data: [], total: 0, page: 1 });

    // The owner's data is untouched.
    const conv = await owner.call({ method: 'GET', url: `/v1/conversations/${id}` });
    expect(conv.json()).toMatchObject({ status: 'open', assigned_to: null });
    expect(conv.json().messages).toEqual([message]);
    expect(
      (await owner.call({ method: 'GET', url: `/v1/conversations/${id}/notes` })).json().total,
    ).toBe(1);
    // The owner's own user cannot be assigned by id from another account either.
    const ownerUser = await createUser(owner);
    const other = await createContact(intruder);
    const otherConv = (await sendText(intruder, other.id)).json().conversation_id;
    expectError(await assign(intruder, otherConv, { user_id: ownerUser.id }), 404);
  });
});
