// Settings › Team, API keys and Your account in Chromium: an admin invites a colleague (the link
// shown once), who accepts it and signs in; roles change (the last admin's 409 in words); a
// removed user's session ends at once; teams; an API key shown once, then revoked; a password
// changed. By the names and roles of DESIGN §5, with axe on every screen.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import {
  acceptInvite,
  axeViolations,
  newAgent,
  PASSWORD,
  RUN_BROWSER,
  signIn,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(path.join(tmpdir(), 'switchboard-team-'))}/`;

async function openSettings(page: Page, section: string): Promise<void> {
  await page
    .getByRole('navigation', { name: 'Main' })
    .getByRole('link', { name: 'Settings' })
    .click();
  await page
    .getByRole('navigation', { name: 'Settings' })
    .getByRole('link', { name: section })
    .click();
  await page.getByRole('heading', { level: 1, name: section }).waitFor();
}

describe.skipIf(!RUN_BROWSER)('the app: team, API keys and your account', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('invites an agent who accepts and signs in; changes a role; the last admin stays; removing ends the session', async () => {
    const acc = await newAccount(app.t);
    const admin = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    const page = admin.page;
    await openSettings(page, 'Team');
    const people = page.getByRole('table');
    await people.getByRole('rowheader', { name: /Grace Hopper/ }).waitFor();
    expect(await axeViolations(page)).toEqual([]);

    // The last admin cannot demote themselves: the 409 says what to do.
    await page.getByRole('combobox', { name: 'Role of Grace Hopper' }).selectOption('agent');
    await expect
      .poll(() => page.getByRole('alert').textContent())
      .toContain("Grace Hopper is the account's last admin");
    expect(await page.getByRole('combobox', { name: 'Role of Grace Hopper' }).inputValue()).toBe(
      'admin',
    );

    // Invite: the link once, with a copy button and its expiry.
    await page.getByRole('button', { name: 'Invite', exact: true }).click();
    const invite = page.getByRole('dialog', { name: 'Invite a colleague' });
    const email = `alan-${Date.now()}@example.com`;
    await invite.getByRole('textbox', { name: 'Name' }).fill('Alan Turing');
    await invite.getByRole('textbox', { name: 'Email' }).fill(email);
    await invite.getByRole('combobox', { name: 'Role' }).selectOption('agent');
    expect(await axeViolations(page)).toEqual([]);
    await invite.getByRole('button', { name: 'Create invite link' }).click();
    const shown = page.getByRole('dialog', { name: 'Invite link for Alan Turing' });
    const linkBox = shown.getByRole('textbox', { name: 'Invite link' });
    const inviteUrl = await linkBox.inputValue();
    expect(inviteUrl).toMatch(/\/app\/invite#token=/);
    expect(await shown.textContent()).toMatch(/until .*20\d\d/);
    await shown.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => shown.getByRole('status').textContent()).toContain('Copied');
    expect(await axeViolations(page)).toEqual([]);
    await shown.getByRole('button', { name: 'Done' }).click();
    await people.getByRole('rowheader', { name: 'Alan Turing' }).waitFor();
    expect(await people.getByRole('row', { name: /Alan Turing/ }).textContent()).toContain(
      'Invited',
    );

    // A new link replaces the first: the first stops working.
    await page.getByRole('button', { name: 'New invite link for Alan Turing' }).click();
    const again = page.getByRole('dialog', { name: 'Invite link for Alan Turing' });
    const secondUrl = await again.getByRole('textbox', { name: 'Invite link' }).inputValue();
    expect(secondUrl).not.toBe(inviteUrl);
    await again.getByRole('button', { name: 'Done' }).click();
    const stale = await app.t.app.inject({
      method: 'POST',
      url: '/v1/invites/accept',
      payload: { token: new URL(inviteUrl).hash.slice(7), password: PASSWORD },
    });
    expect(stale.statusCode).toBe(404);

    // The colleague accepts the link in a browser of their own, then signs in again.
    const alanUser = { id: '', name: 'Alan Turing', email, inviteUrl: secondUrl };
    const accepted = await acceptInvite(app, alanUser);
    await accepted.context.close();
    const alan = await signIn(app, alanUser);
    // No event tells of a user's acceptance: the admin's list shows it when read again.
    await page.reload();
    await expect
      .poll(() => people.getByRole('row', { name: /Alan Turing/ }).textContent())
      .toContain('Active');

    // Roles: Alan becomes an admin, then an agent again.
    const alanId = (
      (await acc.call({ method: 'GET', url: '/v1/users' })).json().data as {
        id: string;
        email: string;
      }[]
    ).find((u) => u.email === email)!.id;
    const roleOf = async () =>
      (await acc.call({ method: 'GET', url: `/v1/users/${alanId}` })).json().role as string;
    await page.getByRole('combobox', { name: 'Role of Alan Turing' }).selectOption('admin');
    await expect.poll(roleOf).toBe('admin');
    await page.getByRole('combobox', { name: 'Role of Alan Turing' }).selectOption('agent');
    await expect.poll(roleOf).toBe('agent');

    // Remove, after a confirmation: Alan's session ends and his app returns to sign-in.
    await page.getByRole('button', { name: 'Remove Alan Turing' }).click();
    const confirm = page.getByRole('dialog', { name: 'Remove Alan Turing?' });
    expect(await axeViolations(page)).toEqual([]);
    await confirm.getByRole('button', { name: 'Remove' }).click();
    await expect.poll(() => people.getByRole('rowheader', { name: 'Alan Turing' }).count()).toBe(0);
    const status = await alan.page.evaluate(async () => (await fetch('/v1/session')).status);
    expect(status).toBe(401);
    await alan.page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Inbox' })
      .click()
      .catch(() => undefined);
    await alan.page.getByRole('button', { name: 'Sign in' }).waitFor();
    await alan.context.close();
    await admin.context.close();
  }, 90_000);

  it('teams: create, rename, members in and out, delete', async () => {
    const acc = await newAccount(app.t);
    const admin = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    await newAgent(app, acc, 'Ada Lovelace').then((a) => a.context.close());
    const page = admin.page;
    await openSettings(page, 'Team');
    await page.getByRole('textbox', { name: 'Team name' }).fill('Billing');
    await page.getByRole('button', { name: 'Create team' }).click();
    const teams = page.getByRole('list', { name: 'Teams' });
    await teams.getByText('Billing').waitFor();
    expect(await teams.textContent()).toContain('No members');

    await page.getByRole('button', { name: 'Edit Billing' }).click();
    const edit = page.getByRole('dialog', { name: 'Edit Billing' });
    await edit.getByRole('textbox', { name: 'Name' }).fill('Billing & refunds');
    await edit.getByRole('checkbox', { name: 'Ada Lovelace' }).check();
    await edit.getByRole('checkbox', { name: 'Grace Hopper' }).check();
    expect(await axeViolations(page)).toEqual([]);
    await edit.getByRole('button', { name: 'Save team' }).click();
    await expect.poll(() => teams.textContent()).toContain('Billing & refunds');
    await expect.poll(() => teams.textContent()).toContain('Ada Lovelace, Grace Hopper');
    await page.screenshot({ path: `${SHOTS}settings-team.png` });

    await page.getByRole('button', { name: 'Edit Billing & refunds' }).click();
    await page
      .getByRole('dialog', { name: 'Edit Billing & refunds' })
      .getByRole('checkbox', { name: 'Ada Lovelace' })
      .uncheck();
    await page.getByRole('button', { name: 'Save team' }).click();
    await expect.poll(() => teams.textContent()).not.toContain('Ada Lovelace');
    const listed = (await acc.call({ method: 'GET', url: '/v1/teams' })).json().data;
    expect(listed).toHaveLength(1);
    expect(listed[0].user_ids).toEqual([admin.user.id]);

    await page.getByRole('button', { name: 'Delete Billing & refunds' }).click();
    await page
      .getByRole('dialog', { name: 'Delete Billing & refunds?' })
      .getByRole('button', { name: 'Delete' })
      .click();
    await page.getByText('No team yet').waitFor();
    expect((await acc.call({ method: 'GET', url: '/v1/teams' })).json().data).toEqual([]);
    await admin.context.close();
  });

  it('an API key is shown once with a copy button, works, and is revoked after a confirmation', async () => {
    const acc = await newAccount(app.t);
    const admin = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    const page = admin.page;
    await openSettings(page, 'API keys');
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('textbox', { name: 'Key name' }).fill('CRM sync');
    await page.getByRole('button', { name: 'Create key' }).click();
    const keyBox = page.getByRole('textbox', { name: 'New API key' });
    const key = await keyBox.inputValue();
    expect(key.length).toBeGreaterThan(20);
    const withKey = (k: string) =>
      app.t.app.inject({
        method: 'GET',
        url: '/v1/contacts',
        headers: { authorization: `Bearer ${k}` },
      });
    expect((await withKey(key)).statusCode).toBe(200);
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => page.getByRole('status').first().textContent()).toContain('Copied');
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}settings-api-keys.png` });

    // Once: after Done, and after a reload, the key is nowhere on the page.
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('rowheader', { name: 'CRM sync' }).waitFor();
    expect(await page.content()).not.toContain(key);
    await page.reload();
    await page.getByRole('rowheader', { name: 'CRM sync' }).waitFor();
    expect(await page.content()).not.toContain(key);

    await page.getByRole('button', { name: 'Revoke CRM sync' }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke CRM sync?' });
    await confirm.getByRole('button', { name: 'Revoke' }).click();
    await expect.poll(() => page.getByRole('rowheader', { name: 'CRM sync' }).count()).toBe(0);
    expect((await withKey(key)).statusCode).toBe(401);
    await admin.context.close();
  });

  it('your account: an agent sees their name read-only and changes their password (a wrong one is an alert)', async () => {
    const acc = await newAccount(app.t);
    const agent = await newAgent(app, acc, 'Alan Turing');
    const page = agent.page;
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Settings' })
      .click();
    await page.getByRole('heading', { level: 1, name: 'Your account' }).waitFor();
    expect(await page.getByRole('main').textContent()).toContain('Alan Turing');
    expect(await page.getByRole('textbox', { name: 'Name' }).count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);

    await page.getByLabel('Current password').fill('not my password');
    await page.getByLabel('New password', { exact: true }).fill('a new long password');
    await page.getByLabel('Confirm new password').fill('a new long password');
    await page.getByRole('button', { name: 'Change password' }).click();
    await expect
      .poll(() => page.getByRole('alert').textContent())
      .toContain('Your current password is wrong.');

    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await expect
      .poll(() => page.getByRole('main').getByRole('status').last().textContent())
      .toContain('Password changed');
    // The new password signs in; the old one no longer does.
    const old = await app.t.app.inject({
      method: 'POST',
      url: '/v1/session',
      payload: { email: agent.user.email, password: PASSWORD },
    });
    expect(old.statusCode).toBe(401);
    const fresh = await app.t.app.inject({
      method: 'POST',
      url: '/v1/session',
      payload: { email: agent.user.email, password: 'a new long password' },
    });
    expect(fresh.statusCode).toBe(201);
    await agent.context.close();
  });

  it('your account: an admin renames themselves', async () => {
    const acc = await newAccount(app.t);
    const admin = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    const page = admin.page;
    await openSettings(page, 'Your account');
    await page.getByRole('textbox', { name: 'Name' }).fill('Grace B. Hopper');
    await page.getByRole('button', { name: 'Save name' }).click();
    await expect.poll(() => page.getByRole('status').first().textContent()).toContain('Name saved');
    const me = (await acc.call({ method: 'GET', url: '/v1/users' })).json().data[0];
    expect(me.name).toBe('Grace B. Hopper');
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}settings-account.png` });
    await admin.context.close();
  });
});
