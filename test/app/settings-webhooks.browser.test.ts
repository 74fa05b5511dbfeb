// Settings › Webhooks in Chromium: create a webhook to a local receiver (the secret shown once),
// "Send test event" reaches it and shows in the delivery log, "Redeliver" sends it again; the
// events offered are every event of the API's enum, an existing webhook's events are changed and
// it is disabled and enabled again; a log of more attempts than a page pages back to the oldest.
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { WebhookDispatcher } from '../../src/webhooks/webhook-dispatcher.js';
import { newAccount, type TestAccount } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import {
  axeViolations,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';
import { testWebhookSecrets } from '../secrets-key.js';

const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : null;

/** Every event a webhook may subscribe to, as docs/openapi.json (the API's contract) lists them. */
const API_EVENTS = (
  JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as {
    components: { schemas: { Webhook: { properties: { events: { items: { enum: string[] } } } } } };
  }
).components.schemas.Webhook.properties.events.items.enum;

/** What the page's clipboard holds (the test context may read it). */
const readClipboard = (page: Page) =>
  page.evaluate(() =>
    (
      globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
    ).navigator.clipboard.readText(),
  );

describe.skipIf(!RUN_BROWSER)('Settings › Webhooks', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  /** Delivers the account's due deliveries now, as a worker would. */
  async function deliver(acc: TestAccount): Promise<void> {
    const d = new WebhookDispatcher({
      db: app.t.db,
      secrets: testWebhookSecrets(),
      clock: app.t.clock,
      log: app.t.app.log,
      allowPrivate: true,
      accountId: acc.accountId,
    });
    try {
      await d.drain();
    } finally {
      await d.stop();
    }
  }

  it('an admin creates a webhook, sees its secret once, sends a test event and redelivers it', async () => {
    const receiver = await startHttpsServer(() => ({ status: 200, body: 'thanks, got it' }));
    const acc = await newAccount(app.t);
    const { page, context } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.base });
    try {
      await page.goto(`${app.base}/app/settings/webhooks`);
      await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
      expect(await axeViolations(page)).toEqual([]);

      await page.getByRole('button', { name: 'Add webhook' }).click();
      const form = page.getByRole('form', { name: 'New webhook' });
      // A refusal of the API shows next to its field.
      await form.getByRole('textbox', { name: 'URL' }).fill('https://user:pw@example.com/hook');
      await form.getByRole('button', { name: 'Create webhook' }).click();
      await form.getByText('must not contain credentials').waitFor();

      await form.getByRole('textbox', { name: 'URL' }).fill(receiver.url('/hook'));
      await form.getByRole('checkbox', { name: 'contact.created' }).check();
      expect(await axeViolations(page)).toEqual([]);
      await form.getByRole('button', { name: 'Create webhook' }).click();

      const dialog = page.getByRole('dialog', { name: 'Webhook signing secret' });
      const secret = await dialog.getByRole('textbox', { name: 'Signing secret' }).inputValue();
      expect(secret).toMatch(/^whsec_/);
      await dialog.getByRole('button', { name: 'Copy secret' }).click();
      await dialog.getByRole('status').getByText('Copied').waitFor();
      expect(await readClipboard(page)).toBe(secret);
      expect(await axeViolations(page)).toEqual([]);
      await dialog.getByRole('button', { name: 'Done' }).click();
      // Shown once: the list and the webhook's page never show it again.
      const link = page.getByRole('link', { name: receiver.url('/hook') });
      await link.waitFor();
      expect(await page.content()).not.toContain(secret);

      await link.click();
      await page.getByRole('heading', { name: receiver.url('/hook'), level: 1 }).waitFor();
      expect(await page.content()).not.toContain(secret);
      await page.getByText('No deliveries yet.').waitFor();
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page
        .getByRole('status')
        .getByText(/Test event evt_\w+ queued/)
        .waitFor();
      await deliver(acc);

      expect(receiver.requests).toHaveLength(1);
      const req = receiver.requests[0]!;
      expect(JSON.parse(req.body.toString())).toMatchObject({ event: 'webhook.test' });
      expect(req.headers['x-service-signature']).toBe(
        createHmac('sha256', secret).update(req.body).digest('hex'),
      );
      // The log shows the attempt (it is read again while the page is open).
      const log = page.getByRole('table', { name: 'Delivery log' });
      const row = log.getByRole('row').filter({ hasText: 'webhook.test' });
      await row.first().waitFor({ timeout: 10_000 });
      await expect.poll(() => row.first().textContent()).toContain('thanks, got it');
      expect(await row.first().textContent()).toContain('200');
      expect(await axeViolations(page)).toEqual([]);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}settings-webhook-desktop.png` });

      await row
        .first()
        .getByRole('button', { name: /^Redeliver webhook\.test/ })
        .click();
      await page.getByRole('status').getByText('queued for redelivery').waitFor();
      await deliver(acc);
      expect(receiver.requests).toHaveLength(2);
      expect(receiver.requests[1]!.headers['webhook-id']).toBe(req.headers['webhook-id']);
      await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(2);

      // Disable, then delete with a confirmation.
      await page.getByRole('button', { name: 'Disable' }).click();
      await page.getByRole('button', { name: 'Enable' }).waitFor();
      expect(await page.getByRole('button', { name: 'Send test event' }).isDisabled()).toBe(true);
      await page.getByRole('button', { name: 'Delete' }).click();
      const confirm = page.getByRole('dialog', { name: 'Delete this webhook?' });
      expect(await axeViolations(page)).toEqual([]);
      await confirm.getByRole('button', { name: 'Delete webhook' }).click();
      await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
      await page.getByText('No webhooks yet.').waitFor();
      const left = await acc.call({ method: 'GET', url: '/v1/webhooks' });
      expect(left.json().total).toBe(0);
    } finally {
      await context.close();
      await receiver.close();
    }
  });

  /** A webhook made with the account's API key. */
  async function webhookOf(acc: TestAccount, url: string, events: string[]) {
    const res = await acc.call({ method: 'POST', url: '/v1/webhooks', payload: { url, events } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ id: string }>().id;
  }

  it("offers every event the API takes; an admin changes a webhook's events, disables and enables it", async () => {
    expect(API_EVENTS).toEqual(expect.arrayContaining(['template.updated', 'broadcast.updated']));
    const acc = await newAccount(app.t);
    const orders = await webhookOf(acc, 'https://hooks.shop-example.com/switchboard/orders', [
      'message.received',
      'message.failed',
    ]);
    const crm = await webhookOf(acc, 'https://crm.shop-example.com/inbound/switchboard', [
      'contact.created',
      'contact.updated',
    ]);
    await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${crm}`,
      payload: { status: 'disabled' },
    });
    const { page, context } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    try {
      await page.goto(`${app.base}/app/settings/webhooks`);
      const table = page.getByRole('table', { name: 'Webhooks' });
      const row = (url: string) => table.getByRole('row').filter({ hasText: url });
      await row('crm.shop-example.com').waitFor();
      expect(await row('crm.shop-example.com').textContent()).toContain('Disabled');
      expect(await row('hooks.shop-example.com').textContent()).toContain(
        'message.received, message.failed',
      );
      expect(await axeViolations(page)).toEqual([]);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}settings-webhooks.png` });

      // A new webhook may subscribe to every event the API takes, and to nothing else.
      await page.getByRole('button', { name: 'Add webhook' }).click();
      const offered = page
        .getByRole('form', { name: 'New webhook' })
        .getByRole('group', { name: 'Events to send' })
        .getByRole('checkbox');
      const names = await offered.evaluateAll((boxes) =>
        boxes.map((b) =>
          (b as unknown as { labels: { textContent: string }[] }).labels[0]!.textContent.trim(),
        ),
      );
      expect([...names].sort()).toEqual([...API_EVENTS].sort());
      await page.getByRole('button', { name: 'Cancel' }).click();

      // Its events changed on its page: the form starts from what it has.
      await page
        .getByRole('link', { name: 'https://hooks.shop-example.com/switchboard/orders' })
        .click();
      await page.getByRole('button', { name: 'Edit events' }).click();
      const form = page.getByRole('form', { name: 'Webhook events' });
      const box = (name: string) => form.getByRole('checkbox', { name, exact: true });
      expect(await box('message.received').isChecked()).toBe(true);
      expect(await box('message.failed').isChecked()).toBe(true);
      expect(await box('template.updated').isChecked()).toBe(false);
      await box('message.failed').uncheck();
      await box('template.updated').check();
      await box('broadcast.updated').check();
      expect(await axeViolations(page)).toEqual([]);
      await form.getByRole('button', { name: 'Save events' }).click();
      await page.getByRole('status').getByText('Events saved.').waitFor();
      expect(await form.count()).toBe(0);
      await page.getByText('message.received, template.updated, broadcast.updated').waitFor();
      const saved = (await acc.call({ method: 'GET', url: `/v1/webhooks/${orders}` })).json<{
        events: string[];
      }>();
      expect([...saved.events].sort()).toEqual([
        'broadcast.updated',
        'message.received',
        'template.updated',
      ]);

      // None at all is not a webhook: the form will not send it.
      await page.getByRole('button', { name: 'Edit events' }).click();
      for (const name of ['message.received', 'template.updated', 'broadcast.updated'])
        await box(name).uncheck();
      expect(await form.getByRole('button', { name: 'Save events' }).isDisabled()).toBe(true);
      await form.getByRole('button', { name: 'Cancel' }).click();

      // Disabled, then enabled again, each said and kept.
      const status = async () =>
        (await acc.call({ method: 'GET', url: `/v1/webhooks/${orders}` })).json<{
          status: string;
        }>().status;
      await page.getByRole('button', { name: 'Disable' }).click();
      await page.getByRole('status').getByText('Webhook disabled').waitFor();
      expect(await status()).toBe('disabled');
      expect(await page.getByRole('button', { name: 'Send test event' }).isDisabled()).toBe(true);
      await page.getByRole('button', { name: 'Enable' }).click();
      await page.getByRole('status').getByText('Webhook enabled').waitFor();
      expect(await status()).toBe('active');
      expect(await page.getByRole('button', { name: 'Send test event' }).isDisabled()).toBe(false);
      await page.getByRole('link', { name: '← All webhooks' }).click();
      await expect
        .poll(() => row('hooks.shop-example.com').textContent())
        .toContain('message.received, template.updated, broadcast.updated');
      expect(await row('hooks.shop-example.com').textContent()).toContain('Active');
    } finally {
      await context.close();
    }
  });

  it('pages the delivery log back to its oldest attempt, a new attempt shown once on top', async () => {
    const receiver = await startHttpsServer(() => ({ status: 200, body: 'ok' }));
    const acc = await newAccount(app.t);
    const id = await webhookOf(acc, receiver.url('/hook'), ['message.received']);
    // A page and a half of attempts, an hour old, one a second, every tenth refused.
    const start = Date.now() - 3_600_000;
    const seeded = Array.from({ length: 150 }, (_, i) => ({
      account_id: acc.accountId,
      id: newId('dlv'),
      webhook_id: id,
      event_id: `evt_seeded${String(i).padStart(4, '0')}`,
      event_type: 'message.received',
      attempt: 1,
      status_code: i % 10 === 0 ? 503 : 200,
      error: null,
      duration_ms: 40 + (i % 30),
      response_excerpt: i % 10 === 0 ? 'busy, try later' : 'ok',
      next_attempt_at: null,
      created_at: new Date(start + i * 1000),
    }));
    await app.t.db.insertInto('webhook_attempts').values(seeded).execute();
    const { page, context } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    try {
      await page.goto(`${app.base}/app/settings/webhooks/${id}`);
      const log = page.getByRole('table', { name: 'Delivery log' });
      const rows = log.getByRole('row');
      const oldest = rows.filter({ hasText: 'evt_seeded0000' });
      // The newest page: 100 attempts (and the header row), not the oldest.
      await expect.poll(() => rows.count()).toBe(101);
      await page.getByText('The newest 100 of 150 attempts.').waitFor();
      expect(await rows.filter({ hasText: 'evt_seeded0149' }).count()).toBe(1);
      expect(await oldest.count()).toBe(0);
      expect(await axeViolations(page)).toEqual([]);

      await page.getByRole('button', { name: 'Older attempts' }).click();
      await expect.poll(() => rows.count()).toBe(151);
      await page.getByText('All 150 attempts shown.').waitFor();
      expect(await oldest.count()).toBe(1);
      expect(await oldest.textContent()).toContain('busy, try later');
      expect(await page.getByRole('button', { name: 'Older attempts' }).count()).toBe(0);

      // A new attempt comes in on top while both pages are shown: each attempt once.
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page
        .getByRole('status')
        .getByText(/Test event evt_\w+ queued/)
        .waitFor();
      await deliver(acc);
      await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(152);
      await page.getByText('All 151 attempts shown.').waitFor();
      expect(await rows.nth(1).textContent()).toContain('webhook.test');
      const ids = await rows.evaluateAll((trs) =>
        trs.slice(1).map((tr) => tr.querySelector('.hint.mono')?.textContent),
      );
      expect(new Set(ids).size).toBe(151);
      expect(await axeViolations(page)).toEqual([]);
    } finally {
      await context.close();
      await receiver.close();
    }
  });
});
