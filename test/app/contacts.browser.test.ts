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

  it('an admin imports a 1,000-row CSV with 10 bad rows, mapping its columns, and sees the report', async () => {
    const acc = await newAccount(app.t);
    const { page } = await newAgent(app, acc, 'Grace Hopper', { role: 'admin' });
    const bad = new Set([3, 50, 150, 250, 350, 450, 550, 650, 750, 999]);
    const lines = ['Mobile,Full name,E-mail,Plan'];
    for (let i = 1; i <= 1000; i++)
      lines.push(`${bad.has(i) ? '12345' : randomPhone()},Person ${i},p${i}@example.com,pro`);
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
    // Line = data row + 1 (the header is line 1).
    const firstLine = await refusedRows
      .getByRole('row')
      .nth(1)
      .getByRole('cell')
      .first()
      .textContent();
    expect(firstLine).toBe('4');
    expect(await axeViolations(page)).toEqual([]);
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
