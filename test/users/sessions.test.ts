import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { eventsOf, expectError, expectStatus, freezeClock } from '../inbox-helpers.js';
import {
  anAddress,
  PASSWORD,
  cookieOf,
  sessionClient,
  signIn,
  signedInUser,
  tokenOf,
} from './session-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  freezeClock(t.clock);
});
afterAll(() => t.close());

const unique = () => Math.random().toString(36).slice(2, 10);
const HOUR = 3600 * 1000;

describe('invites', () => {
  it('POST /v1/users answers an invite link; accepting it sets the password, signs in, and spends it', async () => {
    const acc = await newAccount(t);
    const email = `${unique()}@example.com`;
    const created = await acc.call({
      method: 'POST',
      url: '/v1/users',
      payload: { name: 'Ada', email, role: 'admin' },
    });
    expectStatus(created, 201);
    expect(created.json()).toMatchObject({ role: 'admin', status: 'invited' });
    const token = tokenOf(created.json().invite_url);
    const accept = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/v1/invites/accept', payload });

    expectError(await accept({ token, password: 'short' }), 422, 'password');
    const res = await accept({ token, password: PASSWORD });
    expectStatus(res, 201);
    expect(res.json()).toEqual({
      user: { ...created.json(), status: 'active', invite_url: undefined, expires_at: undefined },
      account: { id: acc.accountId, name: 'Test', plan: 'growth' },
      csrf_token: expect.stringMatching(/^[\w-]{43}$/),
    });
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(
      /^sb_session=[\w-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=2592000$/,
    );
    expect(res.headers['cache-control']).toBe('no-store');
    // One use.
    expectError(await accept({ token, password: PASSWORD }), 404);
    // The user signs in with it from now on.
    expectStatus(await signIn(t, { email, password: PASSWORD }), 201);
    expect(
      (await acc.call({ method: 'GET', url: `/v1/users/${res.json().user.id}` })).json(),
    ).toMatchObject({
      status: 'active',
    });
  });

  it('a link expires after 7 days; a new one replaces the old; an unknown token is a 404', async () => {
    const acc = await newAccount(t);
    const created = await acc.call({
      method: 'POST',
      url: '/v1/users',
      payload: { name: 'Bo', email: `${unique()}@example.com` },
    });
    const first = tokenOf(created.json().invite_url);
    const again = await acc.call({ method: 'POST', url: `/v1/users/${created.json().id}/invite` });
    expectStatus(again, 200);
    expect(Object.keys(again.json()).sort()).toEqual(['expires_at', 'invite_url']);
    const second = tokenOf(again.json().invite_url);
    const accept = (token: string) =>
      t.app.inject({
        method: 'POST',
        url: '/v1/invites/accept',
        payload: { token, password: PASSWORD },
      });
    expectError(await accept(first), 404);
    expectError(await accept('x'.repeat(43)), 404);
    t.clock.advance(7 * 24 * HOUR + 1000);
    expectError(await accept(second), 404);
    const third = await acc.call({ method: 'POST', url: `/v1/users/${created.json().id}/invite` });
    expectStatus(await accept(tokenOf(third.json().invite_url)), 201);
  });

  it("the first admin's setup link needs email and name, and makes an admin", async () => {
    const acc = await newAccount(t);
    const setup = await t.services.users.setupLink(acc.accountId);
    expect(setup.invite_url).toMatch(/\/app\/setup#token=/);
    const token = tokenOf(setup.invite_url);
    const accept = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/v1/invites/accept', payload });
    expectError(await accept({ token, password: PASSWORD, name: 'Root' }), 422, 'email');
    expectError(
      await accept({ token, password: PASSWORD, email: 'root@example.com' }),
      422,
      'name',
    );
    const res = await accept({
      token,
      password: PASSWORD,
      name: 'Root',
      email: `${unique()}@example.com`,
    });
    expectStatus(res, 201);
    expect(res.json().user).toMatchObject({ name: 'Root', role: 'admin', status: 'active' });
    expectError(
      await accept({ token, password: PASSWORD, name: 'Root', email: 'x@example.com' }),
      404,
    );
  });

  it('the admin API invites by email: a new user, or a new link for the one who has it', async () => {
    const acc = await newAccount(t);
    const email = `${unique()}@example.com`;
    const invite = (payload: Record<string, unknown>, id = acc.accountId) =>
      t.app.inject({
        method: 'POST',
        url: `/admin/accounts/${id}/invites`,
        headers: { authorization: 'Bearer test-admin-token-0123456789' },
        payload,
      });
    const first = await invite({ email, role: 'agent' });
    expectStatus(first, 201);
    expect(Object.keys(first.json()).sort()).toEqual(['expires_at', 'invite_url', 'user_id']);
    const second = await invite({ email: email.toUpperCase(), role: 'agent' });
    expectStatus(second, 201);
    expect(second.json().user_id).toBe(first.json().user_id);
    // Without a name, the user gives one when accepting.
    const accept = (payload: Record<string, unknown>) =>
      t.app.inject({ method: 'POST', url: '/v1/invites/accept', payload });
    const token = tokenOf(second.json().invite_url);
    expectError(await accept({ token, password: PASSWORD }), 422, 'name');
    expectStatus(await accept({ token, password: PASSWORD, name: 'Cy' }), 201);
    expectError(await invite({ email, role: 'agent' }, 'acc_00000000000000000000000000'), 404);
    expectError(await invite({ email, role: 'owner' }), 422, 'role');
  });
});

describe('POST /v1/session', () => {
  it('a wrong password and an unknown email get the same 401; the right one a session and its cookie', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc);
    const wrong = await signIn(t, { email: user.email, password: 'not the password' });
    const unknown = await signIn(t, { email: `${unique()}@example.com`, password: PASSWORD });
    expectError(wrong, 401);
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json()).toEqual(wrong.json());
    const res = await signIn(t, { email: user.email.toUpperCase(), password: PASSWORD });
    expectStatus(res, 201);
    expect(res.json().user.id).toBe(user.userId);
    expect(cookieOf(res)).not.toBe(user.token);
  });

  it('GET /v1/session answers the session; DELETE ends it at once and clears the cookie', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc, { name: 'Dee' });
    const got = await user.call({ method: 'GET', url: '/v1/session' });
    expectStatus(got, 200);
    expect(got.json()).toMatchObject({
      user: { id: user.userId, name: 'Dee' },
      csrf_token: user.csrf,
    });
    const out = await user.call({ method: 'DELETE', url: '/v1/session' });
    expectStatus(out, 200);
    expect(out.json()).toEqual({ success: true });
    expect(String(out.headers['set-cookie'])).toMatch(
      /^sb_session=; Path=\/; HttpOnly; SameSite=Lax; Max-Age=0$/,
    );
    expectError(await user.call({ method: 'GET', url: '/v1/session' }), 401);
    expectError(await user.call({ method: 'GET', url: '/v1/conversations' }), 401);
    // With an API key there is no session to show.
    expectError(await acc.call({ method: 'GET', url: '/v1/session' }), 401);
  });

  it('an email with a password in several accounts needs account_id (a 409 lists the accounts)', async () => {
    const email = `${unique()}@example.com`;
    const a = await newAccount(t);
    const b = await newAccount(t);
    const c = await newAccount(t);
    await signedInUser(t, a, { email });
    await signedInUser(t, b, { email });
    await signedInUser(t, c, { email, password: 'another password entirely' });
    const res = await signIn(t, { email, password: PASSWORD });
    expectError(res, 409);
    expect(res.json().error.accounts).toEqual(
      expect.arrayContaining([
        { id: a.accountId, name: 'Test' },
        { id: b.accountId, name: 'Test' },
      ]),
    );
    expect(res.json().error.accounts).toHaveLength(2);
    const inB = await signIn(t, { email, password: PASSWORD, account_id: b.accountId });
    expectStatus(inB, 201);
    expect(inB.json().account.id).toBe(b.accountId);
    // The password opens only c's account there: no choice to make.
    const inC = await signIn(t, { email, password: 'another password entirely' });
    expect(inC.json().account.id).toBe(c.accountId);
  });

  it('10 failures for one email in 15 minutes, or 50 from one address, are a 429 until they age out', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc);
    const [first, second, third, fourth] = [anAddress(), anAddress(), anAddress(), anAddress()];
    for (let i = 0; i < 10; i++)
      expectError(await signIn(t, { email: user.email, password: `guess ${i}` }, first), 401);
    // Locked, even with the right password and from elsewhere; told how long at most.
    const locked = await signIn(t, { email: user.email, password: PASSWORD }, second);
    expectError(locked, 429);
    expect(locked.headers['retry-after']).toBe('900');
    t.clock.advance(15 * 60 * 1000 + 1000);
    expectStatus(await signIn(t, { email: user.email, password: PASSWORD }, second), 201);

    const other = await signedInUser(t, acc);
    for (let i = 0; i < 50; i++)
      expectError(await signIn(t, { email: `${unique()}@example.com`, password: 'x' }, third), 401);
    expectError(await signIn(t, { email: other.email, password: PASSWORD }, third), 429);
    expectStatus(await signIn(t, { email: other.email, password: PASSWORD }, fourth), 201);
  });

  it('a session ends after 12 hours idle, or 30 days after sign-in however busy', async () => {
    const acc = await newAccount(t);
    const idle = await signedInUser(t, acc);
    t.clock.advance(11 * HOUR);
    expectStatus(await idle.call({ method: 'GET', url: '/v1/session' }), 200);
    t.clock.advance(11 * HOUR);
    expectStatus(await idle.call({ method: 'GET', url: '/v1/session' }), 200);
    t.clock.advance(12 * HOUR + 1000);
    expectError(await idle.call({ method: 'GET', url: '/v1/session' }), 401);

    const busy = await signedInUser(t, acc);
    for (let elapsed = 0; elapsed < 30 * 24 * HOUR - 11 * HOUR; elapsed += 11 * HOUR) {
      t.clock.advance(11 * HOUR);
      expectStatus(await busy.call({ method: 'GET', url: '/v1/session' }), 200);
    }
    t.clock.advance(11 * HOUR);
    expectError(await busy.call({ method: 'GET', url: '/v1/session' }), 401);
  });

  it('changing the password ends the other sessions; the old password stops working', async () => {
    const acc = await newAccount(t);
    const here = await signedInUser(t, acc);
    const there = sessionClient(t, await signIn(t, { email: here.email, password: PASSWORD }));
    const change = (payload: Record<string, unknown>) =>
      here.call({ method: 'POST', url: '/v1/session/password', payload });
    expectError(
      await change({ current_password: 'wrong one!!', new_password: 'a new password' }),
      422,
      'current_password',
    );
    expectError(
      await change({ current_password: PASSWORD, new_password: 'short' }),
      422,
      'new_password',
    );
    expectStatus(await change({ current_password: PASSWORD, new_password: 'a new password' }), 200);
    expectStatus(await here.call({ method: 'GET', url: '/v1/session' }), 200);
    expectError(await there.call({ method: 'GET', url: '/v1/session' }), 401);
    expectError(await signIn(t, { email: here.email, password: PASSWORD }), 401);
    expectStatus(await signIn(t, { email: here.email, password: 'a new password' }), 201);
    // A session-only route refuses an API key.
    expectError(
      await acc.call({
        method: 'POST',
        url: '/v1/session/password',
        payload: { current_password: PASSWORD, new_password: 'a new password' },
      }),
      401,
    );
  });

  it('accepting a new invite (a forgotten password) ends the other sessions', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc);
    const invite = await acc.call({ method: 'POST', url: `/v1/users/${user.userId}/invite` });
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/invites/accept',
      payload: { token: tokenOf(invite.json().invite_url), password: 'brand new password' },
    });
    expectStatus(res, 201);
    expectError(await user.call({ method: 'GET', url: '/v1/session' }), 401);
    expectStatus(await signIn(t, { email: user.email, password: 'brand new password' }), 201);
  });
});

describe('the cookie as a credential', () => {
  it('a write with the cookie needs X-CSRF-Token; a cross-site form POST is refused', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc);
    const payload = { phone: '+14155550100' };
    const headers = { cookie: `sb_session=${user.token}` };
    expectError(await t.app.inject({ method: 'POST', url: '/v1/contacts', headers, payload }), 403);
    expectError(
      await t.app.inject({
        method: 'POST',
        url: '/v1/contacts',
        headers: { ...headers, 'x-csrf-token': 'x'.repeat(43) },
        payload,
      }),
      403,
    );
    expectError(
      await t.app.inject({
        method: 'POST',
        url: '/v1/contacts',
        headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'phone=%2B14155550100',
      }),
      403,
    );
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).json().total).toBe(0);
    expectStatus(await user.call({ method: 'POST', url: '/v1/contacts', payload }), 201);
    // Reads need no token.
    expectStatus(await t.app.inject({ method: 'GET', url: '/v1/contacts', headers }), 200);
  });

  it('with both, the Authorization header wins (no CSRF token needed; a bad key is not saved by the cookie)', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc);
    const cookie = `sb_session=${user.token}`;
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        headers: { cookie },
        payload: { phone: '+14155550101' },
      }),
      201,
    );
    expectError(
      await t.app.inject({
        method: 'GET',
        url: '/v1/contacts',
        headers: { cookie, authorization: 'Bearer sb_live_nope' },
      }),
      401,
    );
    expectError(
      await t.app.inject({
        method: 'GET',
        url: '/v1/contacts',
        headers: { cookie: 'sb_session=nope' },
      }),
      401,
    );
  });

  it('a Starter account signs in to the app, though its API key has no access', async () => {
    const acc = await newAccount(t, { plan: 'starter' });
    const created = await t.services.users.createUser(
      { accountId: acc.accountId },
      { name: 'Sam', email: `${unique()}@example.com` },
    );
    const user = sessionClient(
      t,
      await t.app.inject({
        method: 'POST',
        url: '/v1/invites/accept',
        payload: { token: tokenOf(created.invite_url), password: PASSWORD },
      }),
    );
    expectStatus(await user.call({ method: 'GET', url: '/v1/conversations' }), 200);
    expectError(await acc.call({ method: 'GET', url: '/v1/conversations' }), 403);
  });

  it("a signed-in user counts against their own limit, not the key's", async () => {
    const limited = await startTestApp({ config: { sessionRateLimitPerMinute: 3 } });
    try {
      const acc = await newAccount(limited, { rateLimit: 1000 });
      const user = await signedInUser(limited, acc);
      for (let i = 0; i < 3; i++) {
        const res = await user.call({ method: 'GET', url: '/v1/contacts' });
        expectStatus(res, 200);
        expect(res.headers['x-ratelimit-limit']).toBe('3');
      }
      expectError(await user.call({ method: 'GET', url: '/v1/contacts' }), 429);
      expectStatus(await acc.call({ method: 'GET', url: '/v1/contacts' }), 200);
    } finally {
      await limited.close();
    }
  });
});

describe('who did it', () => {
  it('notes and messages written through a session carry their author; through a key, null', async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc, { name: 'Eve' });
    const contact = (
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: '+14155550102' } })
    ).json();
    const sent = await user.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'hi' },
    });
    expectStatus(sent, 201);
    const author = { type: 'user', id: user.userId, name: 'Eve' };
    expect(sent.json().author).toEqual(author);
    const byKey = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'hi again' },
    });
    expect(byKey.json().author).toBeNull();
    const conversation = sent.json().conversation_id;
    const note = await user.call({
      method: 'POST',
      url: `/v1/conversations/${conversation}/notes`,
      payload: { content: 'called them' },
    });
    expectStatus(note, 201);
    expect(note.json().author).toEqual(author);
    const full = await acc.call({ method: 'GET', url: `/v1/conversations/${conversation}` });
    expect(full.json().messages.map((m: { author: unknown }) => m.author)).toEqual([author, null]);
  });

  it("events a session causes carry actor; a key's carry actor: null", async () => {
    const acc = await newAccount(t);
    const user = await signedInUser(t, acc, { name: 'Fay' });
    const contact = (
      await user.call({ method: 'POST', url: '/v1/contacts', payload: { phone: '+14155550103' } })
    ).json();
    const sent = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'hi' },
    });
    const conversation = sent.json().conversation_id;
    const assigned = await user.call({
      method: 'POST',
      url: `/v1/conversations/${conversation}/assign`,
      payload: { user_id: user.userId },
    });
    expectStatus(assigned, 200);
    expectStatus(
      await acc.call({ method: 'POST', url: `/v1/conversations/${conversation}/resolve` }),
      200,
    );
    const actor = { type: 'user', id: user.userId, name: 'Fay' };
    const events = await eventsOf(t.db, acc.accountId);
    expect(events.map((e) => [e.type, (e.data as { actor?: unknown }).actor])).toEqual([
      ['contact.created', actor],
      ['message.created', null],
      ['conversation.assigned', actor],
      ['conversation.resolved', null],
    ]);
    expect(events[2]!.data).toEqual({ ...assigned.json(), actor });
  });
});

describe('what is stored, and the cookie on https', () => {
  it('keeps only hashes of session and invite tokens', async () => {
    const acc = await newAccount(t);
    const created = await acc.call({
      method: 'POST',
      url: '/v1/users',
      payload: { name: 'Hal', email: `${unique()}@example.com` },
    });
    const inviteToken = tokenOf(created.json().invite_url);
    const invites = await t.db
      .selectFrom('invites')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(invites).toHaveLength(1);
    expect(JSON.stringify(invites)).not.toContain(inviteToken);
    const user = sessionClient(
      t,
      await t.app.inject({
        method: 'POST',
        url: '/v1/invites/accept',
        payload: { token: inviteToken, password: PASSWORD },
      }),
    );
    const sessions = await t.db
      .selectFrom('sessions')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(sessions).toHaveLength(1);
    expect(JSON.stringify(sessions)).not.toContain(user.token);
  });

  it('marks the cookie Secure when PUBLIC_URL is https', async () => {
    const secure = await startTestApp({ config: { publicUrl: 'https://inbox.example.com' } });
    try {
      const acc = await newAccount(secure);
      const created = await acc.call({
        method: 'POST',
        url: '/v1/users',
        payload: { name: 'Ivy', email: `${unique()}@example.com` },
      });
      expect(created.json().invite_url).toMatch(
        /^https:\/\/inbox\.example\.com\/app\/invite#token=/,
      );
      const res = await secure.app.inject({
        method: 'POST',
        url: '/v1/invites/accept',
        payload: { token: tokenOf(created.json().invite_url), password: PASSWORD },
      });
      expectStatus(res, 201);
      expect(String(res.headers['set-cookie'])).toMatch(/; Secure$/);
    } finally {
      await secure.close();
    }
  });
});
