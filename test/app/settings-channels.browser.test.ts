// Settings › Channels in Chromium: an admin connects webchat, copies the embed snippet, and a
// page of another site embedding exactly that snippet shows the widget; an admin connects
// WhatsApp, Messenger and Instagram against the fake Graph, a refusal quoted next to the field it
// concerns; a connection whose token Graph later refuses shows the `error` state and the reason.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeGraph, META_ERRORS } from '../fake-graph/server.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { launchChromium } from '../webchat/browser.js';
import {
  acceptInvite,
  axeViolations,
  ensureAppBuilt,
  inviteUser,
  RUN_BROWSER,
  type BrowserApp,
} from './app-helpers.js';

const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : null;

const WA = {
  phone_number_id: '106540352242922',
  business_account_id: '102290129340398',
  access_token: `EAAWA${randomBytes(24).toString('hex')}`,
  app_secret: randomBytes(24).toString('hex'),
};

/** The Facebook Page of Messenger, and another Page linked to an Instagram professional account. */
const PAGE = {
  id: '104838229107721',
  name: 'Shop Example',
  token: `EAAPG${randomBytes(24).toString('hex')}`,
  app_secret: randomBytes(24).toString('hex'),
};
const IG = {
  page_id: '109914571236654',
  name: 'Shop Example Instagram',
  instagram_account_id: '17841405822304914',
  token: `EAAIG${randomBytes(24).toString('hex')}`,
  app_secret: randomBytes(24).toString('hex'),
};

/** A port free now, so that PUBLIC_URL can name the port the service then listens on. */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** What the page's clipboard holds (the test context may read it). */
const readClipboard = (page: Page) =>
  page.evaluate(() =>
    (
      globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
    ).navigator.clipboard.readText(),
  );

describe.skipIf(!RUN_BROWSER)('Settings › Channels', () => {
  let app: BrowserApp;
  let graph: FakeGraph;
  let site: http.Server;
  let siteOrigin = '';
  let sitePage = '';

  beforeAll(async () => {
    await ensureAppBuilt();
    graph = await new FakeGraph().start();
    graph.addPhoneNumber({
      id: WA.phone_number_id,
      token: WA.access_token,
      display_phone_number: '+1 555-010-4477',
      verified_name: 'Shop Example',
      business_account_id: WA.business_account_id,
    });
    graph.addPage({ id: PAGE.id, token: PAGE.token, name: PAGE.name });
    graph.addPage({
      id: IG.page_id,
      token: IG.token,
      name: IG.name,
      instagram_account_id: IG.instagram_account_id,
    });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const t: TestApp = await startTestApp({
      config: { metaGraphUrl: graph.url, publicUrl: base, secretsKey: randomBytes(32) },
    });
    await t.app.listen({ port, host: '127.0.0.1' });
    const browser: Browser = await launchChromium();
    app = {
      t,
      base,
      browser,
      close: async () => {
        await browser.close();
        await t.close();
      },
    };
    // Another site, which embeds whatever snippet the test gives it.
    site = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(sitePage);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    siteOrigin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await app?.close();
    await graph?.stop();
    await new Promise<void>((resolve) => site?.close(() => resolve()) ?? resolve());
  });

  async function admin() {
    const acc = await newAccount(app.t);
    const signedIn = await acceptInvite(app, await inviteUser(acc, 'Grace Hopper', 'admin'));
    await signedIn.context.grantPermissions(['clipboard-read', 'clipboard-write'], {
      origin: app.base,
    });
    return { acc, ...signedIn };
  }

  it(
    'an admin connects webchat, copies the snippet, and a page embedding it shows the widget',
    { timeout: 120_000 },
    async () => {
      const { acc, page, context } = await admin();
      try {
        await page.goto(`${app.base}/app/settings/channels`);
        await page.getByRole('heading', { name: 'Channels', level: 1 }).waitFor();
        const card = page.getByRole('region', { name: 'Website chat' });
        await card.getByText('Not connected', { exact: true }).waitFor();
        expect(await axeViolations(page)).toEqual([]);

        const form = card.getByRole('form', { name: 'Website chat settings' });
        // A bad origin: the API's refusal shows next to the field.
        await form.getByRole('textbox', { name: /Allowed origins/ }).fill('not an origin');
        await form.getByRole('button', { name: 'Connect website chat' }).click();
        await form.locator('#webchat-allowed_origins-error').waitFor();
        expect(
          await form.getByRole('textbox', { name: /Allowed origins/ }).getAttribute('aria-invalid'),
        ).toBe('true');

        await form.getByRole('textbox', { name: /Allowed origins/ }).fill(siteOrigin);
        await form.getByRole('textbox', { name: 'Title' }).fill('Talk to Shop Example');
        await form
          .getByRole('textbox', { name: 'Greeting' })
          .fill('Hello! We answer within minutes.');
        // The preview follows the form as it is typed.
        const preview = card.getByRole('figure');
        await preview.getByText('Talk to Shop Example').waitFor();
        await preview.getByText('Hello! We answer within minutes.').waitFor();
        await form.getByRole('button', { name: 'Connect website chat' }).click();

        // The identity secret, once.
        const dialog = page.getByRole('dialog', { name: 'Identity secret' });
        const secret = await dialog.getByRole('textbox', { name: 'Identity secret' }).inputValue();
        expect(secret.length).toBeGreaterThan(20);
        expect(await axeViolations(page)).toEqual([]);
        await dialog.getByRole('button', { name: 'Done' }).click();
        await card.getByText('Connected', { exact: true }).waitFor();
        expect(await page.content()).not.toContain(secret);

        await card.getByRole('button', { name: 'Copy embed snippet' }).click();
        await card.getByRole('status').getByText('Copied').waitFor();
        const snippet = await readClipboard(page);
        expect(snippet).toMatch(
          new RegExp(
            `^<script src="${app.base}/widget.js" data-widget-key="wk_[^"]+" async></script>$`,
          ),
        );
        expect(await card.getByRole('textbox', { name: 'Embed snippet' }).inputValue()).toBe(
          snippet,
        );
        expect(await axeViolations(page)).toEqual([]);
        if (SHOTS)
          await page.screenshot({ path: `${SHOTS}settings-channels-desktop.png`, fullPage: true });

        // Rotating shows a new secret, once.
        await card.getByRole('button', { name: 'Rotate identity secret' }).click();
        const again = await dialog.getByRole('textbox', { name: 'Identity secret' }).inputValue();
        expect(again).not.toBe(secret);
        await dialog.getByRole('button', { name: 'Done' }).click();

        // Another site embeds the snippet as copied: the widget shows, with the title set here.
        sitePage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head>
<body><h1>Example shop</h1>${snippet}</body></html>`;
        const shop = await context.newPage();
        await shop.goto(`${siteOrigin}/`);
        await shop.getByRole('button', { name: 'Open chat' }).click();
        await expect
          .poll(() => shop.getByRole('textbox', { name: 'Message' }).isEnabled())
          .toBe(true);
        await shop.getByText('Talk to Shop Example').first().waitFor();
        await shop.close();

        const c = await acc.call({ method: 'GET', url: '/v1/channels/webchat' });
        expect(c.json()).toMatchObject({
          status: 'active',
          settings: { allowed_origins: [siteOrigin], title: 'Talk to Shop Example' },
        });

        // Disconnect, confirmed.
        await card.getByRole('button', { name: 'Disconnect Website chat' }).click();
        const confirm = page.getByRole('dialog', { name: 'Disconnect Website chat?' });
        await confirm.getByRole('button', { name: 'Disconnect' }).click();
        await card.getByRole('button', { name: 'Connect website chat', exact: true }).waitFor();
        expect(
          (await acc.call({ method: 'GET', url: '/v1/channels/webchat' })).json().id,
        ).toBeNull();
      } finally {
        await context.close();
      }
    },
  );

  it(
    'an admin connects WhatsApp; Graph refusing the token is quoted next to that field',
    { timeout: 120_000 },
    async () => {
      const { acc, page, context } = await admin();
      try {
        await page.goto(`${app.base}/app/settings/channels`);
        const card = page.getByRole('region', { name: 'WhatsApp' });
        await card.getByRole('button', { name: 'Connect WhatsApp' }).click();
        const form = card.getByRole('form', { name: 'Connect WhatsApp' });
        await form.getByRole('textbox', { name: 'Phone number ID' }).fill(WA.phone_number_id);
        await form
          .getByRole('textbox', { name: 'WhatsApp Business Account ID' })
          .fill(WA.business_account_id);
        await form.getByLabel('Access token').fill('EAAWAwrongtoken');
        await form.getByLabel('App secret').fill(WA.app_secret);
        await form.getByRole('button', { name: 'Save WhatsApp connection' }).click();
        const refusal = form.locator('#whatsapp-access_token-error');
        await refusal.waitFor();
        expect(await refusal.textContent()).toContain('Invalid OAuth access token');
        expect(await form.getByLabel('Access token').getAttribute('aria-describedby')).toBe(
          'whatsapp-access_token-error',
        );
        expect(await axeViolations(page)).toEqual([]);

        await form.getByLabel('Access token').fill(WA.access_token);
        await form.getByRole('button', { name: 'Save WhatsApp connection' }).click();
        await card.getByText('Connected', { exact: true }).waitFor();
        await card.getByText('+1 555-010-4477').waitFor();
        const c = (await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' })).json();
        expect(await card.getByRole('textbox', { name: 'Callback URL' }).inputValue()).toBe(
          c.webhook_url,
        );
        expect(await card.getByRole('textbox', { name: 'Verify token' }).inputValue()).toBe(
          c.verify_token,
        );
        await card.getByRole('button', { name: 'Copy verify token' }).click();
        expect(await readClipboard(page)).toBe(c.verify_token);
        expect(await page.content()).not.toContain(WA.access_token);
        expect(await axeViolations(page)).toEqual([]);

        await card.getByRole('button', { name: 'Disconnect WhatsApp' }).click();
        await page
          .getByRole('dialog', { name: 'Disconnect WhatsApp?' })
          .getByRole('button', { name: 'Disconnect' })
          .click();
        await card.getByRole('button', { name: 'Connect WhatsApp', exact: true }).waitFor();
      } finally {
        await context.close();
      }
    },
  );

  it(
    'an admin connects Messenger; a refusal of its token later shows as the error, until reconnected',
    { timeout: 120_000 },
    async () => {
      const { acc, page, context } = await admin();
      try {
        await page.goto(`${app.base}/app/settings/channels`);
        const card = page.getByRole('region', { name: 'Messenger' });
        await card.getByText('Not connected', { exact: true }).waitFor();
        await card.getByRole('button', { name: 'Connect Messenger' }).click();
        const form = card.getByRole('form', { name: 'Connect Messenger' });
        await form.getByRole('textbox', { name: 'Page ID' }).fill(PAGE.id);
        await form.getByLabel('Page access token').fill(PAGE.token);
        await form.getByLabel('App secret').fill(PAGE.app_secret);
        expect(await axeViolations(page)).toEqual([]);
        await form.getByRole('button', { name: 'Save Messenger connection' }).click();
        await card.getByText('Connected', { exact: true }).waitFor();
        // What Graph said of the Page, and what to paste into Meta's dashboard.
        await card.getByText(PAGE.name, { exact: true }).waitFor();
        const c = (await acc.call({ method: 'GET', url: '/v1/channels/messenger' })).json();
        expect(c).toMatchObject({
          provider: 'messenger',
          status: 'active',
          settings: { page_id: PAGE.id, page_name: PAGE.name },
        });
        expect(await card.getByRole('textbox', { name: 'Callback URL' }).inputValue()).toBe(
          c.webhook_url,
        );
        expect(await card.getByRole('textbox', { name: 'Verify token' }).inputValue()).toBe(
          c.verify_token,
        );
        // Checked with Graph, with the token given, before it was kept.
        expect(graph.last({ method: 'GET', resource: PAGE.id })?.token).toBe(PAGE.token);
        expect(await page.content()).not.toContain(PAGE.token);
        expect(await page.content()).not.toContain(PAGE.app_secret);
        expect(await axeViolations(page)).toEqual([]);
        if (SHOTS) {
          await card.scrollIntoViewIfNeeded();
          await page.screenshot({ path: `${SHOTS}settings-channels-messenger.png` });
        }

        // A send finds the token expired: the connection shows Graph's words once read again.
        const provider = await app.t.services.resolver.resolve(acc.accountId, 'messenger');
        graph.failNext(
          { method: 'POST', resource: `${PAGE.id}/messages` },
          1,
          META_ERRORS.expiredToken,
        );
        const outcome = await provider.send({
          accountId: acc.accountId,
          messageId: 'msg_refused_token',
          channel: 'messenger',
          to: { contactId: 'con_refused_token', phone: null, identity: '7012345678901234' },
          type: 'text',
          content: 'Your order has shipped.',
          template: null,
          media: null,
        });
        expect(outcome).toMatchObject({ status: 'failed' });
        await page.reload();
        await card.getByText('Error', { exact: true }).waitFor();
        const reason = card.getByText('The provider refused the credentials');
        await reason.waitFor();
        expect(await reason.textContent()).toContain(
          'Error validating access token: Session has expired',
        );
        expect(
          (await acc.call({ method: 'GET', url: '/v1/channels/messenger' })).json(),
        ).toMatchObject({ status: 'error', error: expect.stringContaining('Session has expired') });
        expect(await axeViolations(page)).toEqual([]);
        if (SHOTS) {
          await card.scrollIntoViewIfNeeded();
          await page.screenshot({ path: `${SHOTS}settings-channels-error.png` });
        }

        // Connected again with a working token: the error is gone.
        await card.getByRole('button', { name: 'Change Messenger credentials' }).click();
        await form.getByLabel('Page access token').fill(PAGE.token);
        await form.getByLabel('App secret').fill(PAGE.app_secret);
        await form.getByRole('button', { name: 'Save Messenger connection' }).click();
        await card.getByText('Connected', { exact: true }).waitFor();
        expect(await reason.count()).toBe(0);
      } finally {
        await context.close();
      }
    },
  );

  it(
    'an admin connects Instagram; a Page linked to another account is refused next to that field',
    { timeout: 120_000 },
    async () => {
      const { acc, page, context } = await admin();
      try {
        await page.goto(`${app.base}/app/settings/channels`);
        const card = page.getByRole('region', { name: 'Instagram' });
        await card.getByRole('button', { name: 'Connect Instagram' }).click();
        const form = card.getByRole('form', { name: 'Connect Instagram' });
        await form.getByRole('textbox', { name: 'Page ID' }).fill(IG.page_id);
        await form.getByRole('textbox', { name: 'Instagram account ID' }).fill('17841400000000001');
        await form.getByLabel('Page access token').fill(IG.token);
        await form.getByLabel('App secret').fill(IG.app_secret);
        await form.getByRole('button', { name: 'Save Instagram connection' }).click();
        const refusal = form.locator('#instagram-instagram_account_id-error');
        await refusal.waitFor();
        expect(await refusal.textContent()).toContain(IG.instagram_account_id);
        expect(
          await form
            .getByRole('textbox', { name: 'Instagram account ID' })
            .getAttribute('aria-invalid'),
        ).toBe('true');
        expect(await axeViolations(page)).toEqual([]);
        expect(
          (await acc.call({ method: 'GET', url: '/v1/channels/instagram' })).json().id,
        ).toBeNull();

        await form
          .getByRole('textbox', { name: 'Instagram account ID' })
          .fill(IG.instagram_account_id);
        await form.getByRole('button', { name: 'Save Instagram connection' }).click();
        await card.getByText('Connected', { exact: true }).waitFor();
        await card.getByText(IG.name, { exact: true }).waitFor();
        await card.getByText(IG.instagram_account_id, { exact: true }).waitFor();
        const c = (await acc.call({ method: 'GET', url: '/v1/channels/instagram' })).json();
        expect(c).toMatchObject({
          provider: 'instagram',
          status: 'active',
          settings: {
            page_id: IG.page_id,
            instagram_account_id: IG.instagram_account_id,
            page_name: IG.name,
          },
        });
        expect(await card.getByRole('textbox', { name: 'Callback URL' }).inputValue()).toBe(
          c.webhook_url,
        );
        expect(await page.content()).not.toContain(IG.token);
        expect(await axeViolations(page)).toEqual([]);
        if (SHOTS) {
          await card.scrollIntoViewIfNeeded();
          await page.screenshot({ path: `${SHOTS}settings-channels-instagram.png` });
        }
      } finally {
        await context.close();
      }
    },
  );
});
