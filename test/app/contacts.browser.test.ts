// The contacts screens: the table (search, filters, pages), a contact's page (edit, merge with
// its preview, delete), the import (admins) with its report, and the export link.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, randomPhone } from '../helpers.js';
import { createContact, expectStatus, receive } from '../inbox-helpers.js';
import {
  axeViolations,
  namedContact,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const DOCS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/screenshots/', import.meta.url).pathname
  : `${mkdtempSync(path.join(tmpdir(), 'switchboard-contacts-'))}/`;

describe.skipIf(!RUN_BROWSER)('the contacts screens', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('searches, opens a contact, edits it, merges another into it with a preview, and exports', async () => {
    const acc = await newAccount(app.t);
    const wei = await namedContact(acc, 'Wei Chen');
    await namedContact(acc, 'Sofia Rossi');
    await receive(acc, wei.id, 'whatsapp', 'Is the blue one back in stock?');
    // Wei again, met on webchat: no phone, a webchat identity, a tag and a field.
    const webchatContact = (
      await app.t.db
        .transaction()
        .execute((trx) =>
          app.t.services.contacts.findOrCreateByIdentity(
            trx,
            acc.accountId,
            'webchat',
            'visitor-wei',
          ),
        )
    ).id;
    const { page } = await newAgent(app, acc, 'Ada Lovelace', { role: 'agent' });

    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Contacts' })
      .click();
    await page.getByRole('heading', { name: 'Contacts' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    // An agent sees no Import.
    expect(await page.getByRole('link', { name: 'Import CSV' }).count()).toBe(0);
    await page.screenshot({ path: `${DOCS}contacts.png` });

    await page.getByRole('searchbox', { name: 'Search contacts' }).fill('Wei');
    const table = page.getByRole('table', { name: 'Contacts' });
    await expect.poll(() => table.getByRole('row').count()).toBe(2);
    const exportHref = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
    expect(exportHref).toBe('/v1/contacts/export?search=Wei');
    // The export link answers CSV with the session's cookie.
    const csv = await page.request.get(`${app.base}${exportHref}`);
    expect(csv.status()).toBe(200);
    expect(await csv.text()).toContain('Wei Chen');

    await table.getByRole('link', { name: 'Wei Chen' }).click();
    await page.getByRole('heading', { name: 'Wei Chen' }).waitFor();
    await page.getByRole('link', { name: /WhatsApp/ }).waitFor();
    expect(await axeViolations(page)).toEqual([]);

    await page.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('dialog', { name: 'Edit contact' });
    await edit.getByRole('textbox', { name: 'Email' }).fill('wei@example.com');
    await edit.getByRole('textbox', { name: 'Tags' }).fill('vip, stock');
    await edit.getByRole('combobox', { name: 'Lifecycle stage' }).selectOption('customer');
    expect(await axeViolations(page)).toEqual([]);
    await edit.getByRole('button', { name: 'Save' }).click();
    await page.getByText('wei@example.com').waitFor();
    const saved = (await acc.call({ method: 'GET', url: `/v1/contacts/${wei.id}` })).json();
    expect(saved).toMatchObject({
      email: 'wei@example.com',
      tags: ['vip', 'stock'],
      lifecycle_stage: 'customer',
    });

    {
      expectStatus(
        await acc.call({
          method: 'PUT',
          url: `/v1/contacts/${webchatContact}`,
          payload: { name: 'Wei (chat)', tags: ['chat'], custom_fields: { browser: 'firefox' } },
        }),
        200,
      );
      await page.getByRole('button', { name: 'Merge…' }).click();
      const merge = page.getByRole('dialog', { name: 'Merge into Wei Chen' });
      await merge.getByRole('searchbox', { name: 'Find the contact to merge' }).fill('chat');
      await merge.getByRole('button', { name: /Wei \(chat\)/ }).click();
      const preview = merge.getByRole('region', { name: 'After the merge' });
      await preview.waitFor();
      // The preview: this contact's name wins, tags join, the other's field and identity come over.
      await expect.poll(() => preview.textContent()).toContain('vip, stock, chat');
      expect(await preview.textContent()).toContain('firefox');
      expect(await preview.textContent()).toContain('visitor-wei');
      expect(await preview.textContent()).toContain('Wei Chen');
      expect(await axeViolations(page)).toEqual([]);
      await page.screenshot({ path: `${DOCS}contact-merge.png` });
      await merge.getByRole('button', { name: 'Merge' }).click();
      await merge.waitFor({ state: 'detached' });
      const merged = (await acc.call({ method: 'GET', url: `/v1/contacts/${wei.id}` })).json();
      expect(merged.tags).toEqual(['vip', 'stock', 'chat']);
      expect(merged.custom_fields).toEqual({ browser: 'firefox' });
      expectStatus(await acc.call({ method: 'GET', url: `/v1/contacts/${webchatContact}` }), 404);
    }
    await page.screenshot({ path: `${DOCS}contact.png` });

    // Merging two contacts that both have a phone is refused in the preview already.
    const other = await createContact(acc);
    await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${other.id}`,
      payload: { name: 'Wei Twin' },
    });
    await page.getByRole('button', { name: 'Merge…' }).click();
    const refused = page.getByRole('dialog', { name: 'Merge into Wei Chen' });
    await refused.getByRole('searchbox', { name: 'Find the contact to merge' }).fill('Twin');
    await refused.getByRole('button', { name: /Wei Twin/ }).click();
    await refused.getByRole('alert').filter({ hasText: 'Both contacts have a phone' }).waitFor();
    expect(await refused.getByRole('button', { name: 'Merge' }).isDisabled()).toBe(true);
    await refused.getByRole('button', { name: 'Cancel' }).click();

    // Deleting is for admins: an agent has no Delete.
    expect(await page.getByRole('button', { name: 'Delete' }).count()).toBe(0);
  }, 90_000);

  it('filters the table by tag, lifecycle stage and channel, showing the rows and how many match', async () => {
    const acc = await newAccount(app.t);
    // Five contacts: tags, a stage, and the channels they have a conversation on.
    const people: [string, string[], 'lead' | 'customer', string | null][] = [
      ['Ada Vip', ['vip'], 'customer', 'whatsapp'],
      ['Bo Vip', ['vip'], 'lead', 'messenger'],
      ['Cy Trial', ['trial'], 'customer', null],
      ['Di Lead', [], 'lead', 'whatsapp'],
      ['Eve Trial', ['trial'], 'customer', 'messenger'],
    ];
    for (const [name, tags, stage, channel] of people) {
      const { id } = await namedContact(acc, name);
      if (tags.length)
        expectStatus(
          await acc.call({ method: 'PUT', url: `/v1/contacts/${id}`, payload: { tags } }),
          200,
        );
      expectStatus(
        await acc.call({
          method: 'POST',
          url: `/v1/contacts/${id}/lifecycle`,
          payload: { lifecycle_stage: stage },
        }),
        200,
      );
      if (channel) await receive(acc, id, channel, `Hello from ${name}`);
    }
    const { page } = await newAgent(app, acc, 'Ada Lovelace', { role: 'agent' });
    await page.goto(`${app.base}/app/contacts`);
    await page.getByRole('heading', { name: 'Contacts' }).waitFor();
    const table = page.getByRole('table', { name: 'Contacts' });
    const total = page.getByRole('navigation', { name: 'Pages' }).getByRole('status');
    /** The names in the table, and the count the page says matches. */
    const shown = async () => ({
      names: (await table.getByRole('link').allTextContents()).sort(),
      total: await total.textContent(),
    });
    const expectShown = (names: string[]) =>
      expect.poll(shown).toEqual({
        names,
        total: `Page 1 of 1 · ${names.length} ${names.length === 1 ? 'contact' : 'contacts'}`,
      });
    // By the start of its name ("Lifecycle stage" holds "tag" too).
    const tag = page.getByRole('combobox', { name: /^Tag/ });
    const stage = page.getByRole('combobox', { name: 'Lifecycle stage' });
    const channel = page.getByRole('combobox', { name: 'Channel' });

    await expectShown(['Ada Vip', 'Bo Vip', 'Cy Trial', 'Di Lead', 'Eve Trial']);
    await tag.selectOption('vip');
    await expectShown(['Ada Vip', 'Bo Vip']);
    await stage.selectOption('customer');
    await expectShown(['Ada Vip']);
    await tag.selectOption('');
    await expectShown(['Ada Vip', 'Cy Trial', 'Eve Trial']);
    expect(await axeViolations(page)).toEqual([]);
    await stage.selectOption('');
    await channel.selectOption('whatsapp');
    await expectShown(['Ada Vip', 'Di Lead']);
    await channel.selectOption('messenger');
    await expectShown(['Bo Vip', 'Eve Trial']);
    await stage.selectOption('lead');
    await expectShown(['Bo Vip']);
    // The export takes the same filters.
    const href = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
    expect(href).toBe('/v1/contacts/export?lifecycle_stage=lead&channel=messenger');
    const csv = await (await page.request.get(`${app.base}${href}`)).text();
    expect(csv).toContain('Bo Vip');
    expect(csv).not.toContain('Eve Trial');
    // A combination no contact matches says so.
    await stage.selectOption('');
    await tag.selectOption('trial');
    await channel.selectOption('whatsapp');
    await expectShown([]);
    await page.getByText('No contact matches.').waitFor();
    expect(await axeViolations(page)).toEqual([]);
  }, 90_000);

  it('an admin imports a 1,000-row CSV with 10 bad rows, mapping its columns, and sees the report', async () => {
    const acc = await newAccount(app.t);
    const { page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    // Ten bad rows of five kinds: each is refused whole, reported by its line with why.
    const E164 = 'must be a valid E.164 number such as +14155550123';
    const bad = new Map<number, { cells: string; field: string; issue: string }>([
      [3, { cells: '12345,Person 3,p3@example.com,pro', field: 'phone', issue: E164 }],
      [
        50,
        {
          cells: `${randomPhone()},Person 50,not-an-email,pro`,
          field: 'email',
          issue: 'must be a valid email',
        },
      ],
      [
        150,
        {
          cells: ',Person 150,p150@example.com,pro',
          field: 'phone',
          issue: 'is required: rows are matched by phone',
        },
      ],
      [
        250,
        {
          cells: `${randomPhone()},Person 250,p250@example.com,pro,extra`,
          field: 'row',
          issue: 'has 5 cells; the header has 4 columns',
        },
      ],
      [350, { cells: '+1,Person 350,p350@example.com,pro', field: 'phone', issue: E164 }],
      [
        450,
        {
          cells: `${randomPhone()},Person 450,p450@,pro`,
          field: 'email',
          issue: 'must be a valid email',
        },
      ],
      [
        550,
        {
          cells: ',Person 550,,pro',
          field: 'phone',
          issue: 'is required: rows are matched by phone',
        },
      ],
      [
        650,
        {
          cells: `${randomPhone()},Person 650,p650@example.com`,
          field: 'row',
          issue: 'has 3 cells; the header has 4 columns',
        },
      ],
      [750, { cells: 'call me,Person 750,p750@example.com,pro', field: 'phone', issue: E164 }],
      [
        999,
        {
          cells: `${randomPhone()},Person 999,p999 at example.com,pro`,
          field: 'email',
          issue: 'must be a valid email',
        },
      ],
    ]);
    const lines = ['Mobile,Full name,E-mail,Plan'];
    for (let i = 1; i <= 1000; i++)
      lines.push(bad.get(i)?.cells ?? `${randomPhone()},Person ${i},p${i}@example.com,pro`);
    const dir = mkdtempSync(path.join(tmpdir(), 'switchboard-import-'));
    const file = path.join(dir, 'people.csv');
    writeFileSync(file, lines.join('\r\n') + '\r\n');

    await page.goto(`${app.base}/app/contacts`);
    await page.getByRole('link', { name: 'Import CSV' }).click();
    await page.getByRole('heading', { name: 'Import contacts' }).waitFor();
    await page.getByLabel('CSV file').setInputFiles(file);
    // The columns are guessed from the header; the admin may change any.
    await expect
      .poll(() => page.getByRole('combobox', { name: 'Mobile' }).inputValue())
      .toBe('phone');
    expect(await page.getByRole('combobox', { name: 'Full name' }).inputValue()).toBe('name');
    expect(await page.getByRole('combobox', { name: 'E-mail' }).inputValue()).toBe('email');
    expect(await page.getByRole('combobox', { name: 'Plan' }).inputValue()).toBe(
      'custom_fields.plan',
    );
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('status').filter({ hasText: 'Import completed.' }).waitFor();
    const refusedRows = page.getByRole('table', { name: 'Refused rows' });
    await expect.poll(() => refusedRows.getByRole('row').count()).toBe(11);
    const report = await page.locator('.import-counts').textContent();
    expect(report).toContain('Created990');
    expect(report).toContain('Failed10');
    // Every refused row, by line (data row + 1: the header is line 1), field and issue.
    const reported: string[][] = [];
    for (const row of (await refusedRows.getByRole('row').all()).slice(1))
      reported.push(await row.getByRole('cell').allTextContents());
    expect(reported).toEqual(
      [...bad].map(([row, { field, issue }]) => [String(row + 1), field, issue]),
    );
    expect(await axeViolations(page)).toEqual([]);
    // The picture shows the report whole: its counts and every refused row.
    await page
      .getByRole('region', { name: 'Import report' })
      .evaluate((el) => el.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: `${DOCS}contacts-import.png` });
    const list = await acc.call({ method: 'GET', url: '/v1/contacts?limit=1' });
    expect(list.json().total).toBe(990);
    expect(list.json().data[0].custom_fields).toEqual({ plan: 'pro' });

    // An admin deletes a contact, after a confirmation.
    const gone = list.json().data[0];
    await page.goto(`${app.base}/app/contacts/${gone.id}`);
    await page.getByRole('button', { name: 'Delete' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete contact' });
    expect(await axeViolations(page)).toEqual([]);
    await confirm.getByRole('button', { name: 'Delete contact' }).click();
    await page.getByRole('heading', { name: 'Contacts' }).waitFor();
    expectStatus(await acc.call({ method: 'GET', url: `/v1/contacts/${gone.id}` }), 404);
  }, 90_000);
});
