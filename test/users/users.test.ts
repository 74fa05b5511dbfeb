import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { expectError, expectStatus, freezeClock } from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  freezeClock(t.clock);
});
afterAll(() => t.close());

const createUser = (acc: TestAccount, payload: Record<string, unknown>) =>
  acc.call({ method: 'POST', url: '/v1/users', payload });
const createTeam = (acc: TestAccount, payload: Record<string, unknown>) =>
  acc.call({ method: 'POST', url: '/v1/teams', payload });
const unique = () => Math.random().toString(36).slice(2, 10);

describe('users', () => {
  it('POST /v1/users answers 201 with the user', async () => {
    const acc = await newAccount(t);
    const res = await createUser(acc, { name: 'Grace Hopper', email: 'grace@example.com' });
    expectStatus(res, 201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(/^usr_/),
      name: 'Grace Hopper',
      email: 'grace@example.com',
      role: 'agent',
      status: 'invited',
      created_at: t.clock.now().toISOString(),
      invite_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/app\/invite#token=[\w-]{43}$/),
      expires_at: new Date(t.clock.now().getTime() + 7 * 24 * 3600 * 1000).toISOString(),
    });
  });

  it('lists users newest first with pages, and gets one; unknown id is a 404', async () => {
    const acc = await newAccount(t);
    const made = [];
    for (const name of ['Ann', 'Bob', 'Cy']) {
      t.clock.advance(1000);
      const { invite_url, expires_at, ...user } = (
        await createUser(acc, { name, email: `${name.toLowerCase()}@example.com` })
      ).json();
      expect([typeof invite_url, typeof expires_at]).toEqual(['string', 'string']);
      made.push(user);
    }
    const all = await acc.call({ method: 'GET', url: '/v1/users' });
    expectStatus(all, 200);
    expect(all.json()).toEqual({ data: [...made].reverse(), total: 3, page: 1 });
    expect((await acc.call({ method: 'GET', url: '/v1/users?limit=1&page=3' })).json()).toEqual({
      data: [made[0]],
      total: 3,
      page: 3,
    });
    const one = await acc.call({ method: 'GET', url: `/v1/users/${made[1].id}` });
    expectStatus(one, 200);
    expect(one.json()).toEqual(made[1]);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/users/usr_00000000000000000000000000' }),
      404,
    );
    const other = await newAccount(t);
    expectError(await other.call({ method: 'GET', url: `/v1/users/${made[1].id}` }), 404);
    expect((await other.call({ method: 'GET', url: '/v1/users' })).json().total).toBe(0);
  });

  it('a duplicate email in the account is a 409, whatever its case; another account may use it', async () => {
    const acc = await newAccount(t);
    const email = `Agent.${unique()}@Example.com`;
    expectStatus(await createUser(acc, { name: 'A', email }), 201);
    expectError(await createUser(acc, { name: 'B', email }), 409);
    expectError(await createUser(acc, { name: 'B', email: email.toLowerCase() }), 409);
    expectError(await createUser(acc, { name: 'B', email: email.toUpperCase() }), 409);
    expect((await acc.call({ method: 'GET', url: '/v1/users' })).json().total).toBe(1);
    const other = await newAccount(t);
    expectStatus(await createUser(other, { name: 'A', email }), 201);
  });

  it('an email that is not an email address is a 422 naming email; a missing name is a 422 naming name', async () => {
    const acc = await newAccount(t);
    for (const email of ['not-an-email', 'a@', '@example.com', 'two words@example.com', '']) {
      expectError(await createUser(acc, { name: 'A', email }), 422, 'email');
    }
    expectError(await createUser(acc, { email: 'a@example.com' }), 422, 'name');
    expectError(await createUser(acc, { name: '', email: 'a@example.com' }), 422, 'name');
    expectError(
      await createUser(acc, { name: 'A', email: 'a@example.com', role: 'owner' }),
      422,
      'role',
    );
    expect((await acc.call({ method: 'GET', url: '/v1/users' })).json().total).toBe(0);
  });
});

describe('teams', () => {
  it('POST /v1/teams with user_ids answers 201 with the team', async () => {
    const acc = await newAccount(t);
    const u1 = (await createUser(acc, { name: 'Ann', email: `${unique()}@example.com` })).json();
    const u2 = (await createUser(acc, { name: 'Bob', email: `${unique()}@example.com` })).json();
    const res = await createTeam(acc, { name: 'Support', user_ids: [u1.id, u2.id] });
    expectStatus(res, 201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(/^team_/),
      name: 'Support',
      user_ids: [u1.id, u2.id],
      created_at: t.clock.now().toISOString(),
    });
  });

  it('user_ids is optional (an empty team) and repeated ids count once', async () => {
    const acc = await newAccount(t);
    const empty = await createTeam(acc, { name: 'Empty' });
    expectStatus(empty, 201);
    expect(empty.json().user_ids).toEqual([]);
    const u = (await createUser(acc, { name: 'Ann', email: `${unique()}@example.com` })).json();
    const twice = await createTeam(acc, { name: 'Dup', user_ids: [u.id, u.id] });
    expectStatus(twice, 201);
    expect(twice.json().user_ids).toEqual([u.id]);
  });

  it("an unknown user id (or another account's user) is a 404 naming it, and no team is created", async () => {
    const acc = await newAccount(t);
    const u = (await createUser(acc, { name: 'Ann', email: `${unique()}@example.com` })).json();
    const res = await createTeam(acc, {
      name: 'Broken',
      user_ids: [u.id, 'usr_00000000000000000000000000'],
    });
    expect(expectError(res, 404).message).toContain('usr_00000000000000000000000000');
    const other = await newAccount(t);
    const foreign = (
      await createUser(other, { name: 'Zed', email: `${unique()}@example.com` })
    ).json();
    expect(
      expectError(await createTeam(acc, { name: 'Foreign', user_ids: [foreign.id] }), 404).message,
    ).toContain(foreign.id);
    expect((await acc.call({ method: 'GET', url: '/v1/teams' })).json().total).toBe(0);
  });

  it('a missing name is a 422', async () => {
    const acc = await newAccount(t);
    expectError(await createTeam(acc, { user_ids: [] }), 422, 'name');
    expectError(await createTeam(acc, { name: 'X', user_ids: 'usr_1' }), 422, 'user_ids');
  });

  it('lists teams newest first and gets one; unknown id is a 404', async () => {
    const acc = await newAccount(t);
    const made = [];
    for (const name of ['Sales', 'Billing']) {
      t.clock.advance(1000);
      made.push((await createTeam(acc, { name })).json());
    }
    const all = await acc.call({ method: 'GET', url: '/v1/teams' });
    expectStatus(all, 200);
    expect(all.json()).toEqual({ data: [made[1], made[0]], total: 2, page: 1 });
    const one = await acc.call({ method: 'GET', url: `/v1/teams/${made[0].id}` });
    expect(one.json()).toEqual(made[0]);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/teams/team_00000000000000000000000000' }),
      404,
    );
    const other = await newAccount(t);
    expectError(await other.call({ method: 'GET', url: `/v1/teams/${made[0].id}` }), 404);
  });
});
