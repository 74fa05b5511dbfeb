// Settings › Webhooks in Chromium: create a webhook to a local receiver (the secret shown once),
// "Send test event" reaches it and shows in the delivery log, "Redeliver" sends it again.
import { createHmac } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
