import { mkdtemp } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { eventsOf, expectStatus } from '../inbox-helpers.js';
import { chromiumAvailable, eventually, launchChromium, TestSite } from './browser.js';
import {
  connectWebchat,
  identifierHash,
  SECRETS_KEY,
  standInForIdentities,
} from './webchat-helpers.js';

const RUN = chromiumAvailable();

/** What the widget puts on the page's window. */
interface PageGlobals {
  Switchboard: {
    identify(input: { identifier: string; identifier_hash: string; name?: string }): Promise<void>;
  };
}

describe.skipIf(!RUN)('the webchat widget in Chromium', () => {
  let t: TestApp;
  let serviceUrl: string;
  let browser: Browser;
  let identities = false;
  const site = new TestSite();

  beforeAll(async () => {
    t = await startTestApp({ config: { secretsKey: SECRETS_KEY } });
    identities = standInForIdentities(t.services);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    serviceUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    await site.start();
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await site.stop();
    await t?.close();
  });

  /** An account with webchat connected for the test site's origin, and a page embedding it. */
  async function setUp(
    path: string,
    over: Record<string, unknown> = {},
    head?: (secret: string) => string,
  ) {
    const acc = await newAccount(t);
    const c = await connectWebchat(acc, { allowed_origins: [site.origin], ...over });
    site.page(path, { serviceUrl, widgetKey: c.widget_key, head: head?.(c.identity_secret) });
    return { acc, c };
  }

  async function openWidget(context: BrowserContext, url: string): Promise<Page> {
    const page = await context.newPage();
    await page.goto(url);
    await page.getByRole('button', { name: 'Open chat' }).click();
    await expect.poll(() => page.getByRole('textbox', { name: 'Message' }).isEnabled()).toBe(true);
    return page;
  }

  const items = (page: Page) => page.getByRole('log').getByRole('listitem');

  async function write(page: Page, text: string): Promise<void> {
    const box = page.getByRole('textbox', { name: 'Message' });
    await box.fill(text);
    await box.press('Enter');
  }

  /** The visitor's messages the API received, with their conversation. */
  async function received(acc: TestAccount, content: string) {
    return eventually(
      async () => {
        const events = await eventsOf(t.db, acc.accountId, 'message.received');
        const found = events
          .map((e) => e.data as { id: string; conversation_id: string; content: string })
          .filter((m) => m.content === content);
        return found.length > 0 ? found : undefined;
      },
      5_000,
      `message.received "${content}"`,
    );
  }

  async function reply(acc: TestAccount, conversationId: string, content: string) {
    const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${conversationId}` });
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: conv.json().contact_id, channel: 'webchat', type: 'text', content },
    });
    expectStatus(res, 201);
    expect(res.json().status).toBe('sent');
    return res.json<{ id: string }>();
  }

  it('a visitor writes, the team replies live, statuses follow, a reload keeps the history', async () => {
    const { acc } = await setUp('/shop');
    const context = await browser.newContext();
    const page = await openWidget(context, `${site.origin}/shop`);
    await expect.poll(() => page.getByText('Hi! How can we help?').isVisible()).toBe(true);

    await write(page, 'Hello from the browser');
    const [inbound] = await received(acc, 'Hello from the browser');
    const conv = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${inbound!.conversation_id}`,
    });
    expect(conv.json()).toMatchObject({ channel: 'webchat' });
    expect(conv.json().messages.map((m: { content: string }) => m.content)).toEqual([
      'Hello from the browser',
    ]);
    if (identities) {
      const contact = await acc.call({
        method: 'GET',
        url: `/v1/contacts/${conv.json().contact_id}`,
      });
      expect(contact.json()).toMatchObject({ phone: null });
      expect(contact.json().identities).toEqual([
        { channel: 'webchat', id: expect.stringMatching(/^vis_/) },
      ]);
    }

    // The reply shows within a second, with its time.
    const started = Date.now();
    const sent = await reply(acc, inbound!.conversation_id, 'Hello! This is the team.');
    await items(page).filter({ hasText: 'Hello! This is the team.' }).waitFor({ timeout: 1_000 });
    const latency = Date.now() - started;
    expect(latency).toBeLessThan(1_000);
    await expect
      .poll(() =>
        items(page).filter({ hasText: 'Hello! This is the team.' }).locator('time').count(),
      )
      .toBe(1);

    // The widget has it (delivered), and the chat is open on a visible page (read).
    await eventually(
      async () => {
        const types = (await eventsOf(t.db, acc.accountId))
          .filter((e) => (e.data as { id: string }).id === sent.id)
          .map((e) => e.type);
        return types.includes('message.delivered') && types.includes('message.read')
          ? types
          : undefined;
      },
      5_000,
      'delivered and read',
    );

    await page.reload();
    await page.getByRole('button', { name: 'Open chat' }).click();
    await expect
      .poll(async () => items(page).allTextContents(), { timeout: 5_000 })
      .toEqual([
        expect.stringContaining('Hello from the browser'),
        expect.stringContaining('Hello! This is the team.'),
      ]);
    await context.close();
  });

  it('a page on another origin is refused', async () => {
    const { acc } = await setUp('/elsewhere');
    const context = await browser.newContext();
    const page = await context.newPage();
    const refused: string[] = [];
    page.on('requestfailed', (r) => refused.push(r.url()));
    page.on('console', () => undefined);
    await page.goto(`${site.otherOrigin}/elsewhere`);
    await page.getByRole('button', { name: 'Open chat' }).click();
    // The browser refuses the answer (no CORS header for this origin): the widget cannot start.
    await expect.poll(() => refused.some((u) => u.includes('/session'))).toBe(true);
    expect(await page.getByRole('textbox', { name: 'Message' }).isDisabled()).toBe(true);
    expect(await eventsOf(t.db, acc.accountId, 'message.received')).toEqual([]);
    await context.close();
  });

  it('with required identity an unverified visitor can do nothing; a verified one chats', async () => {
    const { acc, c } = await setUp('/required', { identity_verification: 'required' });
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${site.origin}/required`);
    await page.getByRole('button', { name: 'Open chat' }).click();
    await expect
      .poll(() => page.getByText('Please sign in to chat with us.').isVisible())
      .toBe(true);
    expect(await page.getByRole('textbox', { name: 'Message' }).isDisabled()).toBe(true);

    // A forged hash changes nothing.
    await page.evaluate(() =>
      (globalThis as unknown as PageGlobals).Switchboard.identify({
        identifier: 'user-42',
        identifier_hash: 'ab'.repeat(32),
      }).catch(() => undefined),
    );
    expect(await page.getByRole('textbox', { name: 'Message' }).isDisabled()).toBe(true);

    const hash = identifierHash(c.identity_secret, 'user-42');
    await page.evaluate(
      (h) =>
        (globalThis as unknown as PageGlobals).Switchboard.identify({
          identifier: 'user-42',
          identifier_hash: h,
          name: 'Ada',
        }),
      hash,
    );
    await expect.poll(() => page.getByRole('textbox', { name: 'Message' }).isEnabled()).toBe(true);
    await write(page, 'I am Ada');
    const [m] = await received(acc, 'I am Ada');
    const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${m!.conversation_id}` });
    const contact = await acc.call({
      method: 'GET',
      url: `/v1/contacts/${conv.json().contact_id}`,
    });
    expect(contact.json().name).toBe('Ada');
    await context.close();

    // Another device, identified the same way, sees the history.
    const other = await browser.newContext();
    site.page('/required-2', {
      serviceUrl,
      widgetKey: c.widget_key,
      head: `<script>window.SwitchboardIdentity = { identifier: 'user-42', identifier_hash: '${hash}' };</script>`,
    });
    const page2 = await openWidget(other, `${site.origin}/required-2`);
    await expect
      .poll(() => items(page2).allTextContents())
      .toEqual([expect.stringContaining('I am Ada')]);
    await other.close();
  });

  it('the network drops and comes back: nothing is lost or doubled', async () => {
    const { acc } = await setUp('/offline');
    const context = await browser.newContext();
    const page = await openWidget(context, `${site.origin}/offline`);
    await write(page, 'before the cut');
    const [first] = await received(acc, 'before the cut');

    await context.setOffline(true);
    await write(page, 'written offline');
    await expect.poll(() => page.getByRole('button', { name: 'Retry' }).count()).toBe(1);
    await reply(acc, first!.conversation_id, 'reply while offline');
    await context.setOffline(false);

    await received(acc, 'written offline');
    await items(page).filter({ hasText: 'reply while offline' }).waitFor({ timeout: 10_000 });
    await expect
      .poll(() => items(page).allTextContents(), { timeout: 10_000 })
      .toEqual([
        expect.stringContaining('before the cut'),
        expect.stringContaining('reply while offline'),
        expect.stringContaining('written offline'),
      ]);
    const conv = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${first!.conversation_id}`,
    });
    expect(conv.json().messages.map((m: { content: string }) => m.content)).toEqual([
      'before the cut',
      'reply while offline',
      'written offline',
    ]);
    await context.close();
  });

  // The README's pictures: `UPDATE_SCREENSHOTS=1` writes them to docs/, else to a scratch folder.
  it('screenshots: the widget open on a phone and on a desktop', async () => {
    const { acc } = await setUp('/screens', { title: 'Example Shop', color: '#0f766e' });
    const dir = process.env.UPDATE_SCREENSHOTS
      ? path.resolve('docs')
      : await mkdtemp(path.join(tmpdir(), 'webchat-shots-'));
    // One visitor (one browser profile) on both screens.
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await openWidget(context, `${site.origin}/screens`);
    await write(page, 'Hi! Do you ship to Norway?');
    const [m] = await received(acc, 'Hi! Do you ship to Norway?');
    await reply(acc, m!.conversation_id, 'We do: 3 to 5 working days, free above 50 EUR.');
    await items(page).filter({ hasText: 'We do' }).waitFor({ timeout: 5_000 });
    await page.screenshot({ path: path.join(dir, 'webchat-desktop.png') });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: path.join(dir, 'webchat-phone.png') });
    await context.close();
  });
});
