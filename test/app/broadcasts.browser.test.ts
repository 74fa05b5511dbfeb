// Broadcasts in Chromium, by the names and roles of DESIGN §5: an admin builds an audience and
// sees how many contacts match, picks a template, sends; the stats follow live and the recipients
// show the phones the sandbox fails with the reason; one scheduled through the form is listed as
// scheduled and cancelled; an agent sees no "New broadcast". axe on every screen.
import { mkdirSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_FAILING_SUFFIX } from '../../src/channels/sandbox/sandbox.provider.js';
import { newAccount, randomPhone, type TestAccount } from '../helpers.js';
import {
  createContact,
  createPrivateDatabase,
  createTemplate,
  runnerOf,
} from '../broadcasts/broadcast-helpers.js';
import {
  axeViolations,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : null;

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}${name}.png` });
}

/** What a broadcast's page says under one of its facts ("Channel", "Message"…). */
async function fact(page: Page, term: string): Promise<string | null> {
  const terms = await page.getByRole('term').allTextContents();
  const at = terms.indexOf(term);
  return at < 0 ? null : page.getByRole('definition').nth(at).textContent();
}

describe.skipIf(!RUN_BROWSER)('the app: broadcasts', () => {
  let app: BrowserApp;
  let dropDb: () => Promise<void>;
  beforeAll(async () => {
    // A database of its own: this file runs the job runner, which claims every account's jobs.
    const db = await createPrivateDatabase();
    dropDb = db.drop;
    app = await startBrowserApp({
      databaseUrl: db.url,
      config: {
        broadcastBatchSize: 2,
        sandboxAutoAdvance: true,
        sandboxDeliveredAfterMs: 0,
        sandboxReadAfterMs: 3_600_000,
      },
    });
  });
  afterAll(async () => {
    await app?.close();
    await dropDb?.();
  });

  /** Runs the due jobs until none is left (sending, the sandbox's reports). */
  async function drain(): Promise<void> {
    for (let i = 0; i < 20 && (await runnerOf(app.t).drain()) > 0; i++);
  }

  async function named(acc: TestAccount, name: string, phone: string, tags: string[]) {
    const c = await createContact(acc, { phone, tags });
    const res = await acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}`, payload: { name } });
    expect(res.statusCode, res.body).toBe(200);
    return c;
  }

  let failingCount = Math.floor(Math.random() * 900);
  /** A phone the sandbox fails (its ending), never the same twice in a run. */
  const failingPhone = () =>
    `+1415${String(++failingCount % 1000).padStart(3, '0')}${SANDBOX_FAILING_SUFFIX}`;

  it('an admin builds an audience, sees the count, sends a template; the recipients show the failed phones and why', async () => {
    const acc = await newAccount(app.t);
    await named(acc, 'Ada', randomPhone(), ['spring']);
    await named(acc, 'Grace', randomPhone(), ['spring', 'vip']);
    await named(acc, 'Linus', randomPhone(), ['spring']);
    const failedPhones = [failingPhone(), failingPhone()];
    await named(acc, 'Unreachable One', failedPhones[0]!, ['spring']);
    await named(acc, 'Unreachable Two', failedPhones[1]!, ['vip']);
    await named(acc, 'Other', randomPhone(), ['autumn']);
    const template = await createTemplate(
      acc,
      'Hello {{1}}, our spring sale starts now!',
      'approved',
      'spring_sale',
    );

    const { page, context } = await newAgent(app, acc, 'Grace Admin', { role: 'admin' });
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Broadcasts' })
      .click();
    await page.getByRole('heading', { name: 'Broadcasts' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);

    await page.getByRole('link', { name: 'New broadcast' }).click();
    await page.getByRole('heading', { name: 'New broadcast' }).waitFor();
    await page.getByRole('textbox', { name: 'Name' }).fill('Spring sale');
    const matching = page.getByRole('status', { name: 'Matching contacts' });
    await page.getByRole('textbox', { name: 'Tags' }).fill('spring, vip');
    await expect.poll(() => matching.textContent()).toBe('5 contacts match');
    await page.getByRole('combobox', { name: 'Lifecycle stage' }).selectOption('customer');
    await expect.poll(() => matching.textContent()).toBe('0 contacts match');
    await page.getByRole('combobox', { name: 'Lifecycle stage' }).selectOption('');
    await page.getByRole('radio', { name: 'Every contact' }).check();
    await expect.poll(() => matching.textContent()).toBe('6 contacts match');
    await page.getByRole('radio', { name: 'Contacts with tags or a lifecycle stage' }).check();
    await page.getByRole('textbox', { name: 'Tags' }).fill('spring, vip');
    await expect.poll(() => matching.textContent()).toBe('5 contacts match');

    await page.getByRole('combobox', { name: 'Template' }).selectOption(template.name);
    await page.getByRole('textbox', { name: 'Parameter {{1}}' }).fill('friend');
    await expect
      .poll(() => page.getByLabel('Preview').textContent())
      .toBe('Hello friend, our spring sale starts now!');
    expect(await axeViolations(page)).toEqual([]);
    await shot(page, 'broadcast-new');

    await page.getByRole('button', { name: 'Send broadcast' }).click();
    await page.getByRole('heading', { name: 'Spring sale' }).waitFor();
    expect(new URL(page.url()).pathname).toMatch(/^\/app\/broadcasts\/bc_/);
    // The message is named by its template's name (not its id), with the text recipients read.
    await expect
      .poll(() => fact(page, 'Message'))
      .toContain('Hello friend, our spring sale starts now!');
    expect(await fact(page, 'Message')).toMatch(/^Template spring_sale/);

    // Sending happens in the workers; the page follows it live (broadcast.updated, .completed).
    await drain();
    const stat = (label: string) =>
      page.getByRole('region', { name: 'Stats' }).getByLabel(new RegExp(`^${label}: `));
    await expect
      .poll(() => stat('Failed').getAttribute('aria-label'), { timeout: 10_000 })
      .toBe('Failed: 2');
    await expect.poll(() => stat('Delivered').getAttribute('aria-label')).toBe('Delivered: 3');
    await expect.poll(() => stat('Sent').getAttribute('aria-label')).toBe('Sent: 5');

    const table = page.getByRole('table', { name: 'Recipients' });
    await expect.poll(() => table.getByRole('row').count()).toBe(6);
    for (const phone of failedPhones) {
      const row = table.getByRole('row').filter({ hasText: phone });
      await expect.poll(() => row.textContent()).toContain('sandbox: recipient unreachable');
      await expect.poll(() => row.textContent()).toContain('Failed');
    }
    await page.getByRole('combobox', { name: 'Status' }).selectOption('failed');
    await expect.poll(() => table.getByRole('row').count()).toBe(3);
    const failedRows = await table.getByRole('row').allTextContents();
    for (const phone of failedPhones) expect(failedRows.join('\n')).toContain(phone);
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('combobox', { name: 'Status' }).selectOption('');
    await expect.poll(() => table.getByRole('row').count()).toBe(6);
    await shot(page, 'broadcast');

    await page.getByRole('link', { name: '← All broadcasts' }).click();
    const list = page.getByRole('table', { name: 'Broadcasts' });
    await expect
      .poll(() => list.getByRole('row').filter({ hasText: 'Spring sale' }).textContent())
      .toMatch(/Sent/);
    await shot(page, 'broadcasts');
    await context.close();
  });

  it('an admin schedules a broadcast through the form, sees it listed as scheduled, and cancels it after confirming', async () => {
    const acc = await newAccount(app.t);
    await createContact(acc, { tags: ['later'] });
    await createContact(acc, { tags: ['later'] });
    const { page, context } = await newAgent(app, acc, 'Grace Admin', { role: 'admin' });
    await page.goto(`${app.base}/app/broadcasts/new`);
    await page.getByRole('heading', { name: 'New broadcast' }).waitFor();
    await page.getByRole('textbox', { name: 'Name' }).fill('Next week');
    await page.getByRole('combobox', { name: 'Channel' }).selectOption('webchat');
    await page.getByRole('textbox', { name: 'Tags' }).fill('later');
    await expect
      .poll(() => page.getByRole('status', { name: 'Matching contacts' }).textContent())
      .toBe('2 contacts match');
    await page.getByRole('radio', { name: /^Text/ }).check();
    await page.getByRole('textbox', { name: 'Text' }).fill('Soon!');
    await page.getByRole('radio', { name: 'Schedule for later' }).check();
    // Three days ahead at 09:30 in the browser's time zone, as a person would pick it.
    const when = await page.evaluate(() => {
      const d = new Date(Date.now() + 3 * 24 * 3600_000);
      d.setHours(9, 30, 0, 0);
      const pad = (n: number) => String(n).padStart(2, '0');
      return {
        local: `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T09:30`,
        iso: d.toISOString(),
      };
    });
    await page.getByLabel('Send at').fill(when.local);
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Schedule broadcast' }).click();
    await page.getByRole('heading', { name: 'Next week' }).waitFor();
    const id = new URL(page.url()).pathname.split('/').pop()!;
    expect(id).toMatch(/^bc_/);
    const stored = (await acc.call({ method: 'GET', url: `/v1/broadcasts/${id}` })).json();
    expect(stored).toMatchObject({
      status: 'scheduled',
      channel: 'webchat',
      audience: { tags: ['later'] },
      message: { type: 'text', content: 'Soon!' },
      scheduled_at: when.iso,
    });
    await expect.poll(() => fact(page, 'Message')).toBe('Soon!');
    expect(await page.getByText('Scheduled', { exact: true }).count()).toBe(1);

    // Listed as scheduled, with its time.
    await page.getByRole('link', { name: '← All broadcasts' }).click();
    const listed = page
      .getByRole('table', { name: 'Broadcasts' })
      .getByRole('row')
      .filter({ has: page.getByRole('link', { name: 'Next week' }) });
    await expect.poll(() => listed.getByRole('cell').nth(1).textContent()).toBe('Scheduled');
    expect(await listed.getByRole('cell').last().textContent()).toMatch(/^Scheduled /);
    expect(await axeViolations(page)).toEqual([]);

    // Cancelled from its page, after a confirmation that can be declined.
    await listed.getByRole('link', { name: 'Next week' }).click();
    await page.getByRole('heading', { name: 'Next week' }).waitFor();
    await page.getByRole('button', { name: 'Cancel broadcast' }).click();
    const dialog = page.getByRole('dialog', { name: 'Cancel this broadcast?' });
    await dialog.waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Keep it' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Cancel broadcast' }).click();
    await dialog.getByRole('button', { name: 'Cancel broadcast' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.getByText('Cancelled: this broadcast will not be sent.').waitFor();
    expect(await page.getByRole('button', { name: 'Cancel broadcast' }).count()).toBe(0);
    const after = await acc.call({ method: 'GET', url: `/v1/broadcasts/${id}` });
    expect(after.json().status).toBe('draft');
    // The list no longer says scheduled.
    await page.getByRole('link', { name: '← All broadcasts' }).click();
    await expect.poll(() => listed.getByRole('cell').nth(1).textContent()).toBe('Draft');
    await context.close();
  });

  it('an agent sees the broadcasts and their recipients, but no "New broadcast"', async () => {
    const acc = await newAccount(app.t);
    await createContact(acc, { tags: ['news'] });
    const created = await acc.call({
      method: 'POST',
      url: '/v1/broadcasts',
      payload: {
        name: 'Newsletter',
        channel: 'webchat',
        audience: { tags: ['news'] },
        message: { type: 'text', content: 'News!' },
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    await drain();
    const { page, context } = await newAgent(app, acc, 'Alan Agent');
    await page.goto(`${app.base}/app/broadcasts`);
    await page.getByRole('heading', { name: 'Broadcasts' }).waitFor();
    await page.getByRole('link', { name: 'Newsletter' }).waitFor();
    expect(await page.getByRole('link', { name: 'New broadcast' }).count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('link', { name: 'Newsletter' }).click();
    await page.getByRole('table', { name: 'Recipients' }).waitFor();
    expect(await page.getByRole('button', { name: 'Cancel broadcast' }).count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await page.goto(`${app.base}/app/broadcasts/new`);
    await page.getByText('Broadcasts are created by admins.').waitFor();
    expect(await page.getByRole('button', { name: 'Send broadcast' }).count()).toBe(0);
    await context.close();
  });
});
