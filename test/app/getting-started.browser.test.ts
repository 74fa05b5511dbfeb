// The getting-started checklist's first step, "connect a channel (or try the sandbox)", in
// Chromium: "Try the sandbox" has a sample customer write in on a channel the sandbox serves and
// opens that conversation; the admin's answer goes out through the sandbox; the step (and "Send a
// first message") then count done. A second try finds the sample customer again; without the
// sandbox (SANDBOX_ENABLED=false) there is nothing to try.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import {
  axeViolations,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const SAMPLE_PHONE = '+13125550199';

const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : null;

describe.skipIf(!RUN_BROWSER)('the app: getting started, the sandbox step', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('"Try the sandbox" opens a sample customer\'s conversation; answering it counts two steps done', async () => {
    const acc = await newAccount(app.t);
    const { context, page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    try {
      const panel = page.getByRole('region', { name: 'Getting started' });
      const step = panel
        .getByRole('list', { name: 'Getting started steps' })
        .getByRole('listitem')
        .filter({ hasText: 'Connect a channel' });
      await step.waitFor();
      expect(await step.textContent()).toContain('Not done');
      const tryIt = step.getByRole('button', { name: 'Try the sandbox' });
      expect(await tryIt.getAttribute('aria-describedby')).toBeTruthy();
      await step.getByText('A sample customer writes in on WhatsApp').waitFor();
      expect(await axeViolations(page)).toEqual([]);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}getting-started-sandbox.png` });

      await tryIt.click();
      // The conversation opens, with the customer's message.
      const log = page.getByRole('log', { name: 'Messages' });
      await log.getByText("I'm a sample customer").waitFor();
      expect(page.url()).toMatch(/\/app\/conversations\/conv_\w+$/);
      const contacts = (
        await acc.call({
          method: 'GET',
          url: `/v1/contacts?search=${encodeURIComponent('Sandbox customer')}`,
        })
      ).json<{ data: { phone: string; name: string; tags: string[] }[] }>().data;
      expect(contacts).toEqual([
        expect.objectContaining({
          phone: SAMPLE_PHONE,
          name: 'Sandbox customer',
          tags: ['sandbox'],
        }),
      ]);
      const conversations = (
        await acc.call({ method: 'GET', url: '/v1/conversations?status=all' })
      ).json<{ data: { id: string; channel: string }[] }>().data;
      expect(conversations).toHaveLength(1);
      expect(conversations[0]!.channel).toBe('whatsapp');
      expect(page.url()).toContain(conversations[0]!.id);

      // The admin answers through the sandbox.
      await page.getByRole('textbox', { name: 'Reply' }).fill('Hello! Thanks for writing in.');
      await page.getByRole('button', { name: 'Send', exact: true }).click();
      await log.getByText('Hello! Thanks for writing in.').waitFor();

      // Both steps are done, and there is nothing more to try.
      await page.goto(`${app.base}/app/getting-started`);
      const list = page.getByRole('list', { name: 'Getting started steps' });
      const item = (name: string) => list.getByRole('listitem').filter({ hasText: name });
      await expect.poll(() => item('Connect a channel').textContent()).toContain('Done');
      await expect.poll(() => item('Send a first message').textContent()).toContain('Done');
      expect(await item('Embed the webchat widget').textContent()).toContain('Not done');
      await expect
        .poll(() => page.getByRole('status').textContent())
        .toContain('2 of 5 steps done');
      expect(await list.getByRole('button', { name: 'Try the sandbox' }).count()).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('a second try finds the sample customer again; a script writing in on the sandbox counts too', async () => {
    const acc = await newAccount(app.t);
    // The sample customer exists already (an earlier try in another browser, say).
    const made = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: SAMPLE_PHONE, name: 'Pat Example' },
    });
    expect(made.statusCode, made.body).toBe(201);
    const { context, page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    try {
      await page.goto(`${app.base}/app/getting-started`);
      const list = page.getByRole('list', { name: 'Getting started steps' });
      await list.getByRole('button', { name: 'Try the sandbox' }).click();
      await page
        .getByRole('log', { name: 'Messages' })
        .getByText("I'm a sample customer")
        .waitFor();
      const contacts = (await acc.call({ method: 'GET', url: '/v1/contacts' })).json<{
        total: number;
        data: { id: string }[];
      }>();
      expect(contacts.total).toBe(1);
      expect(contacts.data[0]!.id).toBe(made.json<{ id: string }>().id);
    } finally {
      await context.close();
    }

    // Another account, whose developer plays the sandbox from a script: the step is done too.
    const other = await newAccount(app.t);
    const inbound = await other.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: { channel: 'instagram', phone: '+13125550142', type: 'text', content: 'Hi there' },
    });
    expect(inbound.statusCode, inbound.body).toBe(201);
    const admin = await newAgent(app, other, 'Ada Lovelace', { role: 'admin' });
    try {
      await admin.page.goto(`${app.base}/app/getting-started`);
      const item = admin.page
        .getByRole('list', { name: 'Getting started steps' })
        .getByRole('listitem')
        .filter({ hasText: 'Connect a channel' });
      await expect.poll(() => item.textContent()).toContain('Done');
      expect(await item.getByRole('button', { name: 'Try the sandbox' }).count()).toBe(0);
    } finally {
      await admin.context.close();
    }
  }, 60_000);
});

describe.skipIf(!RUN_BROWSER)('the app: getting started without the sandbox', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp({ config: { sandboxEnabled: false } });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('offers no "Try the sandbox" when SANDBOX_ENABLED=false', async () => {
    const acc = await newAccount(app.t);
    const { context, page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    try {
      await page.goto(`${app.base}/app/getting-started`);
      const list = page.getByRole('list', { name: 'Getting started steps' });
      await expect
        .poll(() => page.getByRole('status').textContent())
        .toContain('0 of 5 steps done');
      const item = list.getByRole('listitem').filter({ hasText: 'Connect a channel' });
      expect(await item.textContent()).toContain('Not done');
      expect(await item.getByRole('button', { name: 'Try the sandbox' }).count()).toBe(0);
      expect(await axeViolations(page)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
