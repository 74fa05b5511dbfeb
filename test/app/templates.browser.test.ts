// Settings › Templates in Chromium: create one with its numbered parameters and a live preview,
// see its review status change live (the sandbox's review emits template.updated), filter by
// status, delete after a confirmation; Meta's reason beside a rejected template; the
// getting-started checklist of a new account's admin.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import { expectStatus } from '../inbox-helpers.js';
import {
  axeViolations,
  DESKTOP,
  inviteUser,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(path.join(tmpdir(), 'switchboard-templates-'))}/`;

describe.skipIf(!RUN_BROWSER)('the app: templates and getting started', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('creates a template with a live preview, shows its review live, filters by status, deletes it', async () => {
    const acc = await newAccount(app.t);
    const { context, page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    await page.goto(`${app.base}/app/settings/templates`);
    await page.getByRole('heading', { level: 1, name: 'Templates' }).waitFor();
    await page.getByText('No template yet.').waitFor();
    expect(await axeViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'New template' }).click();
    const dialog = page.getByRole('dialog', { name: 'New template' });
    await dialog.getByRole('textbox', { name: 'Name' }).fill('order_ready');
    await dialog.getByRole('combobox', { name: 'Category' }).selectOption('utility');
    const body = dialog.getByRole('textbox', { name: 'Body' });
    await body.fill('Hi {{1}}, your order {{3}} is ready.');
    // A gap in the numbers is pointed out before the server refuses it.
    await dialog.getByText('Missing {{2}}').waitFor();
    await body.fill('Hi {{1}}, your order {{2}} is ready.');
    expect(await dialog.getByText('Missing').count()).toBe(0);
    const preview = dialog.getByRole('region', { name: 'Preview' });
    expect(await preview.textContent()).toContain('Hi {{1}}, your order {{2}} is ready.');
    await dialog.getByRole('textbox', { name: 'Sample for {{1}}' }).fill('Lukas');
    await dialog.getByRole('textbox', { name: 'Sample for {{2}}' }).fill('#4471');
    await expect
      .poll(() => preview.textContent())
      .toContain('Hi Lukas, your order #4471 is ready.');
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}settings-templates-new.png` });
    await dialog.getByRole('button', { name: 'Create template' }).click();

    const row = page.getByRole('row', { name: /order_ready/ });
    await expect.poll(() => row.textContent()).toContain('Pending review');
    const id = (await acc.call({ method: 'GET', url: '/v1/templates' })).json().data[0]
      .id as string;

    // A name taken is the server's 409, in the dialog.
    await page.getByRole('button', { name: 'New template' }).click();
    await dialog.getByRole('textbox', { name: 'Name' }).fill('order_ready');
    await dialog.getByRole('textbox', { name: 'Body' }).fill('Again');
    await dialog.getByRole('button', { name: 'Create template' }).click();
    await expect.poll(() => dialog.getByRole('alert').textContent()).toContain('already exists');
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    // The review (the sandbox's, as Meta's webhook would) shows without a reload.
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/sandbox/templates/${id}/review`,
        payload: { status: 'approved' },
      }),
      200,
    );
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('Approved');
    await page.screenshot({ path: `${SHOTS}settings-templates.png` });

    // Filter by status.
    await page.getByRole('combobox', { name: 'Show' }).selectOption('rejected');
    await page.getByText('No template is Rejected.').waitFor();
    await page.getByRole('combobox', { name: 'Show' }).selectOption('approved');
    await row.waitFor();

    await page.getByRole('button', { name: 'Delete order_ready' }).click();
    await page
      .getByRole('dialog', { name: 'Delete order_ready?' })
      .getByRole('button', { name: 'Delete' })
      .click();
    await expect.poll(() => row.count()).toBe(0);
    expect((await acc.call({ method: 'GET', url: '/v1/templates' })).json().data).toEqual([]);
    await context.close();
  }, 60_000);

  it("shows Meta's reason beside a rejected template, live", async () => {
    const acc = await newAccount(app.t);
    const created = await acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: { name: 'spring_offer', category: 'utility', body: 'Spring is here: 20% off!' },
    });
    expectStatus(created, 201);
    const { context, page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    // The verdict below must come after the page's event stream has opened, or it is not news.
    const streaming = page.waitForResponse((r) => r.url().includes('/v1/events/stream'));
    await page.goto(`${app.base}/app/settings/templates`);
    await streaming;
    const row = page.getByRole('row', { name: /spring_offer/ });
    await expect.poll(() => row.textContent()).toContain('Pending review');
    expect(await row.textContent()).not.toContain('Reason');

    // Meta's review webhook (message_template_status_update) rejects it with a reason.
    await app.t.services.templates.applyProviderStatus(acc.accountId, {
      providerTemplateId: null,
      name: 'spring_offer',
      language: 'en',
      status: 'rejected',
      reason: 'INCORRECT_CATEGORY',
    });
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('Rejected');
    expect(await row.getByRole('cell').nth(0).textContent()).toBe(
      'RejectedReason: INCORRECT_CATEGORY',
    );
    await page.getByRole('combobox', { name: 'Show' }).selectOption('rejected');
    await expect.poll(() => row.textContent()).toContain('Reason: INCORRECT_CATEGORY');
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}settings-templates-rejected.png` });
    await context.close();
  }, 60_000);

  it("shows a new account's admin the getting-started steps; one becomes done; dismissing hides it", async () => {
    const acc = await newAccount(app.t);
    const { context, page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    const panel = page.getByRole('region', { name: 'Getting started' });
    await panel.waitFor();
    const steps = panel.getByRole('list', { name: 'Getting started steps' });
    const step = (name: string) => steps.getByRole('listitem').filter({ hasText: name });
    for (const name of [
      'Connect a channel',
      'Embed the webchat widget',
      'Invite a colleague',
      'Send a first message',
      'Register a webhook',
    ]) {
      expect(await step(name).textContent()).toContain('Not done');
    }
    expect(await panel.textContent()).toContain('0 of 5 done');
    expect(await axeViolations(page)).toEqual([]);

    // Its link leads to the screen where it is done.
    await step('Invite a colleague').getByRole('link', { name: 'Invite a colleague' }).click();
    await page.getByRole('heading', { level: 1, name: 'Team' }).waitFor();

    // Done through the API (or the Team screen): the checklist says so once read again.
    await inviteUser(acc, 'Alan Turing');
    await page.goto(`${app.base}/app/getting-started`);
    await page.getByRole('heading', { level: 1, name: 'Getting started' }).waitFor();
    const list = page.getByRole('list', { name: 'Getting started steps' });
    await expect
      .poll(() =>
        list.getByRole('listitem').filter({ hasText: 'Invite a colleague' }).textContent(),
      )
      .toContain('Done');
    await expect.poll(() => page.getByRole('status').textContent()).toContain('1 of 5 steps done');
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: `${SHOTS}getting-started.png` });

    // Dismissed in the inbox: it stays hidden, after a reload too.
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Inbox' })
      .click();
    await panel.getByRole('button', { name: 'Dismiss' }).click();
    await expect.poll(() => panel.count()).toBe(0);
    await page.reload();
    await page.getByRole('region', { name: 'Conversation' }).waitFor();
    expect(await panel.count()).toBe(0);
    // The page still has it, and can bring it back.
    await page.goto(`${app.base}/app/getting-started`);
    await page.getByRole('button', { name: 'Show in the inbox' }).click();
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Inbox' })
      .click();
    await panel.waitFor();
    await context.close();

    // An agent never sees it.
    const agent = await newAgent(app, acc, 'Ada Lovelace', { viewport: DESKTOP });
    await agent.page.getByRole('region', { name: 'Conversation' }).waitFor();
    expect(await agent.page.getByRole('region', { name: 'Getting started' }).count()).toBe(0);
    await agent.context.close();
  }, 60_000);
});
