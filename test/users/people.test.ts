import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact, eventsOf, expectError, expectStatus, receive } from '../inbox-helpers.js';
import { signedInUser, type SessionClient } from './session-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

async function openConversation(acc: TestAccount): Promise<string> {
  const contact = await createContact(acc);
  return (await receive(acc, contact.id)).conversation_id;
}

const assign = (who: TestAccount | SessionClient, id: string, body: object) =>
  who.call({ method: 'POST', url: `/v1/conversations/${id}/assign`, payload: body });

describe('view=mine and counts.mine', () => {
  it("are the signed-in user's own conversations (not their teams')", async () => {
    const acc = await newAccount(t);
    const me = await signedInUser(t, acc);
    const other = await signedInUser(t, acc);
    const team = await acc.call({
      method: 'POST',
      url: '/v1/teams',
      payload: { name: 'T', user_ids: [me.userId] },
    });
    const [mine, theirs, teams, nobody] = [
      await openConversation(acc),
      await openConversation(acc),
      await openConversation(acc),
      await openConversation(acc),
    ];
    await assign(acc, mine, { user_id: me.userId });
    await assign(acc, theirs, { user_id: other.userId });
    await assign(acc, teams, { team_id: team.json().id });
    const list = await me.call({ method: 'GET', url: '/v1/conversations?view=mine' });
    expectStatus(list, 200);
    expect(list.json().data.map((c: { id: string }) => c.id)).toEqual([mine]);
    expect(list.json().total).toBe(1);
    expect((await me.call({ method: 'GET', url: '/v1/conversations/counts' })).json()).toEqual({
      mine: 1,
      unassigned: 1,
      all: 4,
    });
    // Resolved ones leave the counts (open conversations only), not view=mine&status=resolved.
    await me.call({ method: 'POST', url: `/v1/conversations/${mine}/resolve` });
    expect((await me.call({ method: 'GET', url: '/v1/conversations/counts' })).json().mine).toBe(0);
    const resolved = await me.call({
      method: 'GET',
      url: '/v1/conversations?view=mine&status=resolved',
    });
    expect(resolved.json().data.map((c: { id: string }) => c.id)).toEqual([mine]);
    expect(
      (await acc.call({ method: 'GET', url: '/v1/conversations/counts' })).json().mine,
    ).toBeNull();
    expectError(await acc.call({ method: 'GET', url: '/v1/conversations?view=mine' }), 422, 'view');
    void nobody;
  });
});

describe('PATCH and DELETE /v1/users/{id}', () => {
  it('renames and changes roles; the last admin can be neither demoted nor removed', async () => {
    const acc = await newAccount(t);
    const boss = await signedInUser(t, acc, { role: 'admin' });
    const renamed = await acc.call({
      method: 'PATCH',
      url: `/v1/users/${boss.userId}`,
      payload: { name: 'The Boss' },
    });
    expectStatus(renamed, 200);
    expect(renamed.json()).toMatchObject({ name: 'The Boss', role: 'admin' });
    expectError(
      await acc.call({
        method: 'PATCH',
        url: `/v1/users/${boss.userId}`,
        payload: { role: 'agent' },
      }),
      409,
    );
    expectError(await acc.call({ method: 'DELETE', url: `/v1/users/${boss.userId}` }), 409);
    expectError(
      await acc.call({ method: 'PATCH', url: `/v1/users/${boss.userId}`, payload: {} }),
      422,
    );
    const second = await signedInUser(t, acc, { role: 'admin' });
    expectStatus(
      await boss.call({
        method: 'PATCH',
        url: `/v1/users/${boss.userId}`,
        payload: { role: 'agent' },
      }),
      200,
    );
    // Now an agent: the change applies to the session at once.
    expectError(await boss.call({ method: 'GET', url: '/v1/api-keys' }), 403);
    expectError(await second.call({ method: 'DELETE', url: `/v1/users/${second.userId}` }), 409);
    expectError(
      await acc.call({
        method: 'PATCH',
        url: '/v1/users/usr_00000000000000000000000000',
        payload: { name: 'x' },
      }),
      404,
    );
  });

  it('removing a user ends their sessions at once, unassigns their conversations with events, keeps their name on what they wrote', async () => {
    const acc = await newAccount(t);
    const gone = await signedInUser(t, acc, { name: 'Gus' });
    const team = await acc.call({
      method: 'POST',
      url: '/v1/teams',
      payload: { name: 'T', user_ids: [gone.userId] },
    });
    const conversation = await openConversation(acc);
    await assign(acc, conversation, { user_id: gone.userId });
    const note = await gone.call({
      method: 'POST',
      url: `/v1/conversations/${conversation}/notes`,
      payload: { content: 'hi' },
    });
    expectStatus(note, 201);
    const removed = await acc.call({ method: 'DELETE', url: `/v1/users/${gone.userId}` });
    expectStatus(removed, 200);
    expect(removed.json()).toEqual({ success: true });
    expectError(await gone.call({ method: 'GET', url: '/v1/session' }), 401);
    const got = await acc.call({ method: 'GET', url: `/v1/conversations/${conversation}` });
    expect(got.json().assigned_to).toBeNull();
    const unassigned = await eventsOf(t.db, acc.accountId, 'conversation.unassigned');
    expect(unassigned).toHaveLength(1);
    expect(unassigned[0]!.data).toMatchObject({ id: conversation, assigned_to: null, actor: null });
    expect(
      (await acc.call({ method: 'GET', url: `/v1/teams/${team.json().id}` })).json().user_ids,
    ).toEqual([]);
    const notes = await acc.call({ method: 'GET', url: `/v1/conversations/${conversation}/notes` });
    expect(notes.json().data[0].author).toEqual({ type: 'user', id: gone.userId, name: 'Gus' });
    expectError(await acc.call({ method: 'GET', url: `/v1/users/${gone.userId}` }), 404);
    expectError(await acc.call({ method: 'DELETE', url: `/v1/users/${gone.userId}` }), 404);
  });
});

describe('PATCH and DELETE /v1/teams/{id}', () => {
  it('renames a team and sets its members (each must exist); deleting it unassigns its conversations', async () => {
    const acc = await newAccount(t);
    const member = await signedInUser(t, acc);
    const team = (
      await acc.call({ method: 'POST', url: '/v1/teams', payload: { name: 'Sales' } })
    ).json();
    const patched = await acc.call({
      method: 'PATCH',
      url: `/v1/teams/${team.id}`,
      payload: { name: 'Sales EU', user_ids: [member.userId, member.userId] },
    });
    expectStatus(patched, 200);
    expect(patched.json()).toMatchObject({ name: 'Sales EU', user_ids: [member.userId] });
    expectError(
      await acc.call({
        method: 'PATCH',
        url: `/v1/teams/${team.id}`,
        payload: { user_ids: ['usr_00000000000000000000000000'] },
      }),
      404,
    );
    const conversation = await openConversation(acc);
    await assign(acc, conversation, { team_id: team.id });
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/teams/${team.id}` }), 200);
    expect(
      (await acc.call({ method: 'GET', url: `/v1/conversations/${conversation}` })).json()
        .assigned_to,
    ).toBeNull();
    expect(await eventsOf(t.db, acc.accountId, 'conversation.unassigned')).toHaveLength(1);
    expectError(await acc.call({ method: 'GET', url: `/v1/teams/${team.id}` }), 404);
    const other = await newAccount(t);
    expectError(await other.call({ method: 'DELETE', url: `/v1/teams/${team.id}` }), 404);
  });
});
