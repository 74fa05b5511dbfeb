// The inbox in Chromium: views and counts, live arrivals, search, text that stays text, and the
// keyboard alone. Signed in for real: users invited with the test account's API key.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import { expectStatus, receive } from '../inbox-helpers.js';
import {
  axeViolations,
  namedContact,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  watchDialogs,
  type BrowserApp,
} from './app-helpers.js';

describe.skipIf(!RUN_BROWSER)('the inbox in Chromium', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('shows each view with its count (Mine, Unassigned, All), Open or Resolved, and searches', async () => {
    const acc = await newAccount(app.t);
    const { context, page, user } = await newAgent(app, acc, 'Ada Lovelace');
    const conversations: Record<string, string> = {};
    for (const name of ['Grace Hopper', 'Alan Turing', 'Edsger Dijkstra', 'Barbara Liskov']) {
      const contact = await namedContact(acc, name);
      conversations[name] = (await receive(acc, contact.id, 'whatsapp', `Hi from ${name}`))
        .conversation_id as string;
    }
    const assign = await acc.call({
      method: 'POST',
      url: `/v1/conversations/${conversations['Grace Hopper']}/assign`,
      payload: { user_id: user.id },
    });
    expectStatus(assign, 200);
    const other = await acc.call({
      method: 'POST',
      url: '/v1/users',
      payload: { name: 'Bob', email: `bob-${Date.now()}@example.com` },
    });
    expectStatus(other, 201);
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/conversations/${conversations['Alan Turing']}/assign`,
        payload: { user_id: other.json().id },
      }),
      200,
    );
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/conversations/${conversations['Barbara Liskov']}/resolve`,
      }),
      200,
    );
    await page.reload();

    const list = page.getByRole('list', { name: 'Conversations' });
    const names = () =>
      list
        .getByRole('listitem')
        .evaluateAll((items) => items.map((i) => i.getAttribute('aria-label')!.split(',')[0]));
    await expect.poll(() => page.getByRole('tab', { name: /^Mine 1$/ }).count()).toBe(1);
    await expect.poll(() => page.getByRole('tab', { name: /^Unassigned 1$/ }).count()).toBe(1);
    await expect.poll(() => page.getByRole('tab', { name: /^All 3$/ }).count()).toBe(1);

    await page.getByRole('tab', { name: /^Mine/ }).click();
    await expect.poll(names).toEqual(['Grace Hopper']);
    await page.getByRole('tab', { name: /^Unassigned/ }).click();
    await expect.poll(names).toEqual(['Edsger Dijkstra']);
    await page.getByRole('tab', { name: /^All/ }).click();
    await expect
      .poll(async () => (await names()).sort())
      .toEqual(['Alan Turing', 'Edsger Dijkstra', 'Grace Hopper']);
    await page.getByRole('radio', { name: 'Resolved' }).click();
    await expect.poll(names).toEqual(['Barbara Liskov']);
    await page.getByRole('radio', { name: 'Open' }).click();
    await expect.poll(names).toHaveLength(3);

    // Search: the start of any word of the name.
    await page.getByRole('searchbox', { name: 'Search conversations' }).fill('turi');
    await expect.poll(names).toEqual(['Alan Turing']);
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });

  it('puts a sandbox inbound message at the top within a second, with no reload, and clears its unread count on opening', async () => {
    const acc = await newAccount(app.t);
    const older = await namedContact(acc, 'Grace Hopper');
    await receive(acc, older.id, 'whatsapp', 'Is my order on its way?');
    const { context, page } = await newAgent(app, acc);
    // A mark on the page's window: a reload would lose it.
    await page.evaluate(() => ((globalThis as { mark?: number }).mark = 1));
    const reloaded = () => page.evaluate(() => (globalThis as { mark?: number }).mark !== 1);

    const nav = page.getByRole('navigation', { name: 'Main' });
    for (const link of ['Inbox', 'Contacts', 'Broadcasts', 'Settings']) {
      await expect.poll(() => nav.getByRole('link', { name: link }).count()).toBe(1);
    }
    const list = page.getByRole('list', { name: 'Conversations' });
    await expect.poll(() => page.getByRole('tab', { name: /^All 1$/ }).count()).toBe(1);
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'))
      .toBe('Grace Hopper, 1 unread, Is my order on its way?');
    expect(await axeViolations(page)).toEqual([]);

    const newer = await namedContact(acc, 'Alan Turing');
    const sent = Date.now();
    const arrived = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: {
        channel: 'whatsapp',
        contact_id: newer.id,
        type: 'text',
        content: 'Hello from the sandbox',
      },
    });
    expectStatus(arrived, 201);
    await list
      .getByRole('listitem')
      .first()
      .and(page.getByRole('listitem', { name: 'Alan Turing, 1 unread, Hello from the sandbox' }))
      .waitFor({ timeout: 1_000 });
    expect(Date.now() - sent).toBeLessThan(1_000);
    expect(await reloaded()).toBe(false);
    await expect.poll(() => page.getByRole('tab', { name: /^All 2$/ }).count()).toBe(1);
    await expect.poll(() => page.title()).toBe('(2) Inbox · Switchboard');

    await list.getByRole('link', { name: /Alan Turing/ }).click();
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('Hello from the sandbox');
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'))
      .toBe('Alan Turing, Hello from the sandbox');
    await expect.poll(() => page.title()).toBe('(1) Inbox · Switchboard');
    const read = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${arrived.json().conversation_id}`,
    });
    expect(read.json().unread_count).toBe(0);

    // While it is open, what arrives is read at once.
    await receive(acc, newer.id, 'whatsapp', 'Still there?');
    await expect.poll(() => log.textContent()).toContain('Still there?');
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'))
      .toBe('Alan Turing, Still there?');
    expect(await reloaded()).toBe(false);
    await context.close();
  });

  it('shows what contacts wrote as text, never as HTML, and no script runs', async () => {
    const acc = await newAccount(app.t);
    const contact = await namedContact(acc, '<b>x</b>');
    await receive(acc, contact.id, 'whatsapp', '<img src=x onerror=alert(1)>');
    const { context, page } = await newAgent(app, acc);
    const dialogs = watchDialogs(page);
    const list = page.getByRole('list', { name: 'Conversations' });
    await expect
      .poll(() => list.getByRole('listitem').first().getAttribute('aria-label'))
      .toBe('<b>x</b>, 1 unread, <img src=x onerror=alert(1)>');
    await list.getByRole('link', { name: /<b>x<\/b>/ }).click();
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('<img src=x onerror=alert(1)>');
    await expect
      .poll(() =>
        page.getByRole('region', { name: 'Contact' }).getByRole('heading').first().textContent(),
      )
      .toBe('<b>x</b>');
    expect(await page.locator('main b, main img, [onerror]').count()).toBe(0);
    await page.waitForTimeout(200);
    expect(dialogs).toEqual([]);

    // A reply that looks like HTML is sent, and shown, as the text it is.
    const reply = page.getByRole('textbox', { name: 'Reply' });
    await reply.fill('<script>alert(2)</script>');
    await reply.press('Enter');
    await expect.poll(() => log.textContent()).toContain('<script>alert(2)</script>');
    expect(await page.locator('main script').count()).toBe(0);
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('works from the keyboard alone: j/k, Enter opens, r, type, Enter sends, e resolves, / searches, ? lists the shortcuts', async () => {
    const acc = await newAccount(app.t);
    const first = await namedContact(acc, 'Katherine Johnson');
    await receive(acc, first.id, 'whatsapp', 'First');
    const second = await namedContact(acc, 'Dorothy Vaughan');
    await receive(acc, second.id, 'whatsapp', 'Second');
    const { context, page } = await newAgent(app, acc);
    const list = page.getByRole('list', { name: 'Conversations' });
    await expect.poll(() => list.getByRole('listitem').count()).toBe(2);
    const open = (name: string) =>
      expect
        .poll(() => page.getByRole('region', { name: `Conversation with ${name}` }).count())
        .toBe(1);

    await page.keyboard.press('j');
    await open('Dorothy Vaughan');
    await page.keyboard.press('j');
    await open('Katherine Johnson');
    await page.keyboard.press('k');
    await open('Dorothy Vaughan');

    // Tab to the list's links and open one with Enter.
    await page.getByRole('searchbox', { name: 'Search conversations' }).focus();
    const seen: string[] = [];
    for (let i = 0; i < 20 && !seen.at(-1)?.includes('Katherine'); i++) {
      await page.keyboard.press('Tab');
      seen.push(await page.evaluate<string>('document.activeElement?.textContent ?? ""'));
    }
    expect(seen.at(-1), seen.join(' | ')).toContain('Katherine Johnson');
    await page.keyboard.press('Enter');
    await open('Katherine Johnson');

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
});
