import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact, expectStatus, receive } from '../inbox-helpers.js';
import { chromiumAvailable, launchChromium } from '../webchat/browser.js';
import { axeViolations, ensureAppBuilt } from './app-helpers.js';
import { tokenOf } from '../users/session-helpers.js';

const RUN = chromiumAvailable();
const DOCS = new URL('../../docs/', import.meta.url).pathname;

describe.skipIf(!RUN)('the agent inbox in Chromium', () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;

  beforeAll(async () => {
    await ensureAppBuilt();
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /**
   * A browser signed in to `acc`. Until the sessions API (DESIGN §5) is on this branch, the
   * page is lent the account's API key: GET /v1/session answers a session, and every other
   * /v1 request carries the key. The app itself is unchanged: it is a client of /v1 only.
   */
  async function signedIn(
    acc: TestAccount,
    viewport = { width: 1280, height: 800 },
  ): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport });
    await context.route(`${base}/v1/**`, async (route) => {
      const url = new URL(route.request().url());
      if (url.pathname === '/v1/session' && route.request().method() === 'GET') {
        return route.fulfill({
          json: {
            user: { id: 'usr_test', name: 'Ada Agent', email: 'ada@example.com', role: 'admin' },
            account: { id: acc.accountId, name: 'Test', plan: 'growth' },
            csrf_token: 'csrf-test',
          },
        });
      }
      return route.continue({
        headers: { ...route.request().headers(), authorization: `Bearer ${acc.apiKey}` },
      });
    });
    const page = await context.newPage();
    await page.goto(`${base}/app`);
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    return { context, page };
  }

  async function named(acc: TestAccount, name: string) {
    const contact = await createContact(acc);
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${contact.id}`,
      payload: { name },
    });
    expectStatus(res, 200);
    return contact;
  }

  it('shows the sign-in screen, says why a sign-in failed, and passes axe', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${base}/app`);
    await page.getByRole('textbox', { name: 'Email' }).fill('nobody@example.com');
    await page.getByRole('textbox', { name: 'Password' }).fill('not the password');
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).not.toBe('');
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });

  it('accepts an invite, signs out, and signs in again with the sessions API', async () => {
    const acc = await newAccount(t);
    const email = `ada-${Date.now()}@example.com`;
    const created = await acc.call({
      method: 'POST',
      url: '/v1/users',
      payload: { name: 'Ada Lovelace', email, role: 'agent' },
    });
    expectStatus(created, 201);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${base}/app/invite#token=${tokenOf(created.json().invite_url)}`);
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('textbox', { name: 'Password' }).fill('a long enough password');
    await page.getByRole('button', { name: 'Accept invite' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/app/inbox');
    expect(new URL(page.url()).hash).toBe('');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.reload();
    await page.getByRole('textbox', { name: 'Email' }).fill(email);
    await page.getByRole('textbox', { name: 'Password' }).fill('a long enough password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await expect.poll(() => page.getByRole('tab', { name: /^Mine 0$/ }).count()).toBe(1);
    await context.close();
  });

  it('lists the conversations of each view with its count, moves a new message to the top live, and clears its unread count on opening', async () => {
    const acc = await newAccount(t);
    const older = await named(acc, 'Grace Hopper');
    await receive(acc, older.id, 'whatsapp', 'Is my order on its way?');
    const { context, page } = await signedIn(acc);

    const nav = page.getByRole('navigation', { name: 'Main' });
    for (const link of ['Inbox', 'Contacts', 'Broadcasts', 'Settings']) {
      await expect.poll(() => nav.getByRole('link', { name: link }).count()).toBe(1);
    }
    const list = page.getByRole('list', { name: 'Conversations' });
    await expect.poll(() => page.getByRole('tab', { name: /^All 1$/ }).count()).toBe(1);
    await expect.poll(() => page.getByRole('tab', { name: /^Unassigned 1$/ }).count()).toBe(1);
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'))
      .toBe('Grace Hopper, 1 unread, Is my order on its way?');
    expect(await axeViolations(page)).toEqual([]);

    // A message arrives: its conversation is at the top within a second, with no reload.
    const newer = await named(acc, 'Alan Turing');
    const arrived = Date.now();
    await receive(acc, newer.id, 'whatsapp', 'Hello from the sandbox');
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'), { timeout: 3_000 })
      .toBe('Alan Turing, 1 unread, Hello from the sandbox');
    expect(Date.now() - arrived).toBeLessThan(1_000 + 300);
    await expect.poll(() => page.getByRole('tab', { name: /^All 2$/ }).count()).toBe(1);
    await expect.poll(() => page.title()).toBe('(2) Inbox · Switchboard');

    await list.getByRole('link', { name: /Alan Turing/ }).click();
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('Hello from the sandbox');
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'))
      .toBe('Alan Turing, Hello from the sandbox');
    await expect.poll(() => page.title()).toBe('(1) Inbox · Switchboard');
    await context.close();
  });

  it('replies, writes a note, and shows what contacts wrote as text, never as HTML', async () => {
    const acc = await newAccount(t);
    const contact = await named(acc, '<b>x</b>');
    await receive(acc, contact.id, 'whatsapp', '<img src=x onerror=alert(1)>');
    const { context, page } = await signedIn(acc);
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });

    const list = page.getByRole('list', { name: 'Conversations' });
    await list.getByRole('link', { name: /<b>x<\/b>/ }).click();
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('<img src=x onerror=alert(1)>');
    expect(await page.locator('main b, main img').count()).toBe(0);
    await expect
      .poll(() =>
        page.getByRole('region', { name: 'Contact' }).getByRole('heading').first().textContent(),
      )
      .toBe('<b>x</b>');

    const reply = page.getByRole('textbox', { name: 'Reply' });
    await reply.fill('Thanks, it ships today.');
    await reply.press('Shift+Enter');
    await reply.pressSequentially('Tracking follows.');
    expect(await reply.inputValue()).toBe('Thanks, it ships today.\nTracking follows.');
    await reply.press('Enter');
    await expect.poll(() => log.textContent()).toContain('Tracking follows.');
    expect(await reply.inputValue()).toBe('');

    await page.getByRole('button', { name: 'Private note' }).click();
    expect(
      await page.getByRole('button', { name: 'Private note' }).getAttribute('aria-pressed'),
    ).toBe('true');
    await page.getByRole('textbox', { name: 'Note' }).fill('VIP: handle with care');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect
      .poll(() => log.getByRole('article', { name: 'Private note' }).textContent())
      .toContain('VIP: handle with care');
    expect(await axeViolations(page)).toEqual([]);
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('works from the keyboard alone: j opens, r replies, e resolves, / searches, ? lists the shortcuts', async () => {
    const acc = await newAccount(t);
    const first = await named(acc, 'Katherine Johnson');
    await receive(acc, first.id, 'whatsapp', 'First');
    const second = await named(acc, 'Dorothy Vaughan');
    await receive(acc, second.id, 'whatsapp', 'Second');
    const { context, page } = await signedIn(acc);
    const list = page.getByRole('list', { name: 'Conversations' });
    await expect.poll(() => list.getByRole('listitem').count()).toBe(2);

    await page.keyboard.press('j');
    await expect
      .poll(() => page.getByRole('region', { name: 'Conversation with Dorothy Vaughan' }).count())
      .toBe(1);
    await page.keyboard.press('j');
    await expect
      .poll(() => page.getByRole('region', { name: 'Conversation with Katherine Johnson' }).count())
      .toBe(1);
    await page.keyboard.press('k');
    await expect
      .poll(() => page.getByRole('region', { name: 'Conversation with Dorothy Vaughan' }).count())
      .toBe(1);

    await page.keyboard.press('r');
    await expect.poll(() => page.locator(':focus').getAttribute('aria-label')).toBe('Reply');
    await page.keyboard.type('On it');
    await page.keyboard.press('Enter');
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('On it');
    await page.keyboard.press('Escape');

    await page.keyboard.press('e');
    await expect.poll(() => page.getByRole('button', { name: 'Reopen' }).count()).toBe(1);
    await expect.poll(() => page.getByRole('tab', { name: /^All 1$/ }).count()).toBe(1);

    await page.keyboard.press('/');
    await expect
      .poll(() => page.locator(':focus').getAttribute('aria-label'))
      .toBe('Search conversations');
    await page.keyboard.press('Escape');

    await page.keyboard.press('?');
    const dialog = page.getByRole('dialog', { name: 'Keyboard shortcuts' });
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain('Next conversation');
    expect(await axeViolations(page)).toEqual([]);
    await page.keyboard.press('Escape');
    await expect.poll(() => dialog.count()).toBe(0);
    await context.close();
  });

  it('takes the screenshots of docs/app.md (desktop and phone)', async () => {
    const acc = await newAccount(t);
    const people = [
      ['Maria Garcia', 'Hi! Can I change the delivery address for order 4471?'],
      ['Kenji Watanabe', 'The invoice PDF came through, thanks.'],
      ['Amara Okafor', 'Do you ship to Lagos?'],
      ['Lukas Schmidt', 'My package says delivered but it is not here.'],
      ['Sofia Rossi', 'Perfect, see you Friday.'],
    ];
    const contacts = [];
    for (const [name, text] of people) {
      const c = await named(acc, name!);
      await receive(acc, c.id, 'whatsapp', text);
      contacts.push(c);
    }
    const { context, page } = await signedIn(acc);
    const list = page.getByRole('list', { name: 'Conversations' });
    await list.getByRole('link', { name: /Sofia Rossi/ }).waitFor();
    await page.screenshot({ path: `${DOCS}app-inbox-desktop.png` });
    await list.getByRole('link', { name: /Maria Garcia/ }).click();
    const reply = page.getByRole('textbox', { name: 'Reply' });
    await reply.fill('Of course. What is the new address?');
    await reply.press('Enter');
    await receive(acc, contacts[0]!.id, 'whatsapp', 'Calle Mayor 12, 28013 Madrid');
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('Calle Mayor 12');
    await page.getByRole('button', { name: 'Private note' }).click();
    await page.getByRole('textbox', { name: 'Note' }).fill('Address changed before dispatch.');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => log.textContent()).toContain('Address changed');
    await page.getByRole('button', { name: 'Private note' }).click();
    await page.screenshot({ path: `${DOCS}app-conversation-desktop.png` });
    await context.close();

    const phone = await signedIn(acc, { width: 390, height: 844 });
    await phone.page
      .getByRole('list', { name: 'Conversations' })
      .getByRole('listitem')
      .first()
      .waitFor();
    await phone.page.screenshot({ path: `${DOCS}app-inbox-phone.png` });
    await phone.page
      .getByRole('list', { name: 'Conversations' })
      .getByRole('link', { name: /Maria Garcia/ })
      .click();
    await phone.page.getByRole('log', { name: 'Messages' }).getByText('Calle Mayor 12').waitFor();
    expect(await axeViolations(phone.page)).toEqual([]);
    await phone.page.screenshot({ path: `${DOCS}app-conversation-phone.png` });
    await phone.context.close();
  });
});
