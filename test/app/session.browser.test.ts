// Signing in and out, invites and the first admin's setup link, what an agent may not do, and
// a forged cross-site form: in Chromium, by the names and roles of DESIGN §5.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import {
  acceptInvite,
  axeViolations,
  DESKTOP,
  inviteUser,
  newAgent,
  PASSWORD,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

describe.skipIf(!RUN_BROWSER)('the app: signing in, invites, roles, forged requests', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('says why a sign-in failed, signs in, signs out (the session ends), and passes axe', async () => {
    const acc = await newAccount(app.t);
    const user = await inviteUser(acc, 'Grace Hopper');
    await app.t.app.inject({
      method: 'POST',
      url: '/v1/invites/accept',
      payload: { token: new URL(user.inviteUrl).hash.slice(7), password: PASSWORD },
    });

    const context = await app.browser.newContext({ viewport: DESKTOP });
    const page = await context.newPage();
    await page.goto(`${app.base}/app`);
    await page.getByRole('textbox', { name: 'Email' }).fill(user.email);
    await page.getByRole('textbox', { name: 'Password' }).fill('not the password');
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/\S/);
    expect(await axeViolations(page)).toEqual([]);

    await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await page.getByRole('list', { name: 'Conversations' }).waitFor();
    const cookies = await context.cookies();
    expect(cookies.find((c) => c.name === 'sb_session')).toMatchObject({
      httpOnly: true,
      sameSite: 'Lax',
    });

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    // The session is over on the server too: the cookie it had no longer reads anything.
    const after = await page.evaluate(async () => (await fetch('/v1/conversations')).status);
    expect(after).toBe(401);
    await page.reload();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await context.close();
  });

  it('accepts an invite (the token stays in the fragment) and the first admin setup link', async () => {
    const acc = await newAccount(app.t);
    const user = await inviteUser(acc, 'Ada Lovelace');
    const context = await app.browser.newContext({ viewport: DESKTOP });
    const page = await context.newPage();
    const seen: string[] = [];
    page.on('request', (r) => seen.push(r.url()));
    await page.goto(`${app.base}/app/invite${new URL(user.inviteUrl).hash}`);
    await page.getByRole('button', { name: 'Accept invite' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Accept invite' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/app/inbox');
    expect(new URL(page.url()).hash).toBe('');
    expect(seen.filter((u) => u.includes('token'))).toEqual([]);
    await context.close();

    // A spent link says so.
    const again = await app.browser.newContext({ viewport: DESKTOP });
    const spent = await again.newPage();
    await spent.goto(`${app.base}/app/invite${new URL(user.inviteUrl).hash}`);
    await spent.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
    await spent.getByRole('button', { name: 'Accept invite' }).click();
    await expect.poll(() => spent.getByRole('alert').textContent()).toContain('unknown, used');
    await again.close();

    // The first admin's link (printed at a store's first start) asks for name and email too.
    const setup = await app.t.services.users.setupLink(acc.accountId);
    const first = await app.browser.newContext({ viewport: DESKTOP });
    const admin = await first.newPage();
    await admin.goto(`${app.base}/app/setup${new URL(setup.invite_url).hash}`);
    await admin.getByRole('textbox', { name: 'Password' }).waitFor();
    expect(await axeViolations(admin)).toEqual([]);
    await admin.getByRole('textbox', { name: 'Name' }).fill('Marie Curie');
    await admin.getByRole('textbox', { name: 'Email' }).fill(`marie-${Date.now()}@example.com`);
    await admin.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
    await admin.getByRole('button', { name: 'Create account' }).click();
    await admin.getByRole('navigation', { name: 'Main' }).waitFor();
    await admin.getByRole('link', { name: 'Settings' }).click();
    await expect.poll(() => admin.getByRole('main').textContent()).not.toContain('for admins');
    await first.close();
  });

  it('shows an agent that Settings is for admins, and the server refuses the session admin routes', async () => {
    const acc = await newAccount(app.t);
    const { context, page } = await newAgent(app, acc, 'Alan Turing');
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Settings' })
      .click();
    await expect
      .poll(() => page.getByRole('main').textContent())
      .toContain('Settings are for admins');
    // Only "Your account" (their own name and password): no admin control.
    const main = page.getByRole('main');
    await main.getByRole('button', { name: 'Change password' }).waitFor();
    for (const name of ['Invite', 'Connect', 'Create webhook', 'Create key', 'New template']) {
      expect(await main.getByRole('button', { name }).count(), name).toBe(0);
    }
    expect(await main.getByRole('link', { name: 'Team' }).count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    // Opened by its address too.
    await page.goto(`${app.base}/app/settings`);
    await expect
      .poll(() => page.getByRole('main').textContent())
      .toContain('Settings are for admins');

    // From the page, with the session and its CSRF token: an admin route is a 403.
    const csrf = await page.evaluate(async () => {
      const res = await fetch('/v1/session');
      return ((await res.json()) as { csrf_token: string }).csrf_token;
    });
    const refused = await page.evaluate(async (token) => {
      const res = await fetch('/v1/webhooks', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': token },
        body: JSON.stringify({ url: 'https://example.com/hook', events: ['message.received'] }),
      });
      return { status: res.status, body: (await res.json()) as { error: { code: string } } };
    }, csrf);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');
    const keys = await page.evaluate(async () => (await fetch('/v1/api-keys')).status);
    expect(keys).toBe(403);
    const hooks = await acc.call({ method: 'GET', url: '/v1/webhooks' });
    expect(hooks.json().data).toEqual([]);
    await context.close();
  });

  it('refuses a cross-site form POST carrying the session cookie: nothing is created', async () => {
    const acc = await newAccount(app.t);
    const agent = await inviteUser(acc, 'Mallory Target');
    const { context, page } = await acceptInvite(app, agent);
    // Another origin of the same site (another port): the browser sends the Lax cookie with
    // its form, and only the missing CSRF token stands in the way.
    const target = `${app.base}/v1/contacts`;
    const form = `<!doctype html><form method="post" action="${target}" enctype="text/plain">
      <input name='{"phone":"+14155550199","name":"forged","x":"' value='"}'></form>
      <script>document.forms[0].submit()</script>`;
    const evil: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(form);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      // Same site, another port: the Lax cookie goes along, and the missing CSRF token is a 403.
      // Another site (localhost): the browser keeps the Lax cookie to itself, a 401.
      for (const [host, status] of [
        ['127.0.0.1', 403],
        ['localhost', 401],
      ] as const) {
        const port = (evil.address() as AddressInfo).port;
        const posted = page.waitForResponse((r) => r.url() === target);
        await page.goto(`http://${host}:${port}/`);
        expect((await posted).status(), host).toBe(status);
      }
    } finally {
      await new Promise((resolve) => evil.close(resolve));
    }
    const all = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(all.json().data).toEqual([]);
    await context.close();
  });
});
