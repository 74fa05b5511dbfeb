import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import {
  ContactImportsRepository,
  ImportEnded,
} from '../../src/contacts/imports/imports.repository.js';
import { INTERRUPTED, scheduleImportSweep } from '../../src/contacts/imports/imports.service.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { createContact, receive } from '../inbox-helpers.js';
import { signedInUser } from '../users/session-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ config: { importMaxBytes: 200_000 } });
});
afterAll(() => t.close());

interface Report {
  id: string;
  status: string;
  total_rows: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
  errors: { line: number; field: string; issue: string }[];
}

function post(acc: TestAccount, csv: string, query = '') {
  return acc.call({
    method: 'POST',
    url: `/v1/contacts/imports${query}`,
    headers: { 'content-type': 'text/csv' },
    payload: csv,
  });
}

async function importCsv(acc: TestAccount, csv: string, query = ''): Promise<Report> {
  const res = await post(acc, csv, query);
  expect(res.statusCode, res.body).toBe(202);
  const started = res.json<{ id: string; status: string }>();
  expect(started.status).toBe('processing');
  expect(started.id).toMatch(/^imp_/);
  await t.services.contactImports.settled();
  const report = await acc.call({ method: 'GET', url: `/v1/contacts/imports/${started.id}` });
  expect(report.statusCode, report.body).toBe(200);
  return report.json<Report>();
}

async function byPhone(acc: TestAccount, phone: string) {
  const res = await acc.call({
    method: 'GET',
    url: `/v1/contacts?search=${encodeURIComponent(phone)}`,
  });
  return res.json<{ data: Record<string, unknown>[] }>().data[0];
}

function eventsOf(accountId: string, type: string) {
  return t.db
    .selectFrom('events')
    .select(['data'])
    .where('account_id', '=', accountId)
    .where('type', '=', type)
    .execute();
}

describe('POST /v1/contacts/imports', () => {
  it('imports 990 rows of a 1,000-row file and reports the 10 bad ones by line', async () => {
    const acc = await newAccount(t);
    const lines = ['phone,name,email,tags,lifecycle_stage,custom_fields.plan'];
    const bad = new Set([5, 100, 200, 300, 400, 500, 600, 700, 800, 1000]);
    for (let i = 1; i <= 1000; i++) {
      const phone = bad.has(i) ? 'not-a-phone' : randomPhone();
      lines.push(`${phone},Person ${i},p${i}@example.com,a;b,lead,pro`);
    }
    const report = await importCsv(acc, lines.join('\n') + '\n');
    expect(report).toMatchObject({
      status: 'completed',
      total_rows: 1000,
      created: 990,
      updated: 0,
      skipped: 0,
      failed: 10,
    });
    // Data row i is on line i + 1 (the header is line 1).
    expect(report.errors.map((e) => e.line)).toEqual([...bad].map((i) => i + 1));
    expect(report.errors.every((e) => e.field === 'phone')).toBe(true);
    expect((await eventsOf(acc.accountId, 'contact.created')).length).toBe(990);
    const list = await acc.call({ method: 'GET', url: '/v1/contacts?tag=b&limit=1' });
    expect(list.json().total).toBe(990);
    expect(list.json().data[0]).toMatchObject({
      tags: ['a', 'b'],
      lifecycle_stage: 'lead',
      custom_fields: { plan: 'pro' },
    });
  });

  it('updates the contact a phone belongs to; an empty cell leaves its field', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone, name: 'Old', email: 'old@example.com', custom_fields: { a: 'x' } },
    });
    const report = await importCsv(
      acc,
      `phone,name,email,custom_fields.b\r\n${phone},New,,y\r\n${phone},,,\r\n`,
    );
    expect(report).toMatchObject({ total_rows: 2, created: 0, updated: 2, failed: 0 });
    const contact = await byPhone(acc, phone);
    expect(contact).toMatchObject({
      name: 'New',
      email: 'old@example.com',
      custom_fields: { a: 'x', b: 'y' },
    });
    // The second row changed nothing: one event.
    expect((await eventsOf(acc.accountId, 'contact.updated')).length).toBe(1);
  });

  it('on_conflict=skip leaves an existing contact and counts the row skipped', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone, name: 'Kept' } });
    const report = await importCsv(
      acc,
      `phone,name\n${phone},Changed\n${randomPhone()},New\n`,
      '?on_conflict=skip',
    );
    expect(report).toMatchObject({ total_rows: 2, created: 1, skipped: 1, updated: 0 });
    expect((await byPhone(acc, phone))!.name).toBe('Kept');
  });

  it('a phone repeated in the file updates the contact its earlier row made', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const report = await importCsv(acc, `phone,name,email\n${phone},First,\n${phone},,a@b.co\n`);
    expect(report).toMatchObject({ total_rows: 2, created: 1, updated: 1 });
    expect(await byPhone(acc, phone)).toMatchObject({ name: 'First', email: 'a@b.co' });
    expect((await eventsOf(acc.accountId, 'contact.created')).length).toBe(1);
    expect((await eventsOf(acc.accountId, 'contact.updated')).length).toBe(1);
  });

  it('batches are written in order while the next is read: a phone finds what an earlier batch made', async () => {
    const acc = await newAccount(t);
    // Batches of 2,000 rows: the second and third repeat phones the first made.
    const phones = Array.from({ length: 2500 }, () => randomPhone());
    const lines = [
      'phone,name',
      ...phones.map((p, i) => `${p},First ${i}`),
      ...phones.slice(0, 2000).map((p, i) => `${p},Again ${i}`),
    ];
    const report = await importCsv(acc, `${lines.join('\n')}\n`);
    expect(report).toMatchObject({
      status: 'completed',
      total_rows: 4500,
      created: 2500,
      updated: 2000,
      failed: 0,
    });
    expect(await byPhone(acc, phones[1999]!)).toMatchObject({ name: 'Again 1999' });
    expect(await byPhone(acc, phones[2000]!)).toMatchObject({ name: 'First 2000' });
    expect((await eventsOf(acc.accountId, 'contact.updated')).length).toBe(2000);

    // A file that stops being CSV in its third batch: the two batches before it stay.
    const other = await newAccount(t);
    const more = Array.from({ length: 4100 }, () => randomPhone());
    const bad = ['phone,name', ...more.map((p, i) => `${p},Row ${i}`), `${randomPhone()},"open`];
    const failed = await importCsv(other, `${bad.join('\n')}\n`);
    expect(failed).toMatchObject({ status: 'failed', created: 4100 });
    expect(failed.errors.at(-1)).toMatchObject({ line: 4102, field: 'file' });
  });

  it("a phone repeated many times: one event per row that changes it, in the file's order", async () => {
    const acc = await newAccount(t);
    const [fresh, known] = [randomPhone(), randomPhone()];
    await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: known, name: 'Known' },
    });
    const csv = [
      'phone,name,tags',
      `${fresh},One,a`,
      `${known},K1,`,
      `${fresh},Two,`,
      `${fresh},Two,`, // changes nothing: counted updated, no event
      `${known},K2,b`,
      `${fresh},Three,c`,
    ].join('\n');
    const report = await importCsv(acc, `${csv}\n`);
    expect(report).toMatchObject({ total_rows: 6, created: 1, updated: 5, skipped: 0, failed: 0 });
    expect(await byPhone(acc, fresh)).toMatchObject({ name: 'Three', tags: ['c'] });
    expect(await byPhone(acc, known)).toMatchObject({ name: 'K2', tags: ['b'] });
    const events = await t.db
      .selectFrom('events')
      .select(['type', 'data'])
      .where('account_id', '=', acc.accountId)
      .where('type', 'in', ['contact.created', 'contact.updated'])
      .orderBy('seq')
      .execute();
    const seen = events.map((e) => {
      const c = e.data as { phone: string; name: string; tags: string[] };
      return `${e.type} ${c.phone === fresh ? 'fresh' : 'known'} ${c.name} ${c.tags.join(';')}`;
    });
    expect(seen).toEqual([
      'contact.created known Known ', // the POST before the import
      'contact.created fresh One a',
      'contact.updated known K1 ',
      'contact.updated fresh Two a',
      'contact.updated known K2 b',
      'contact.updated fresh Three c',
    ]);
    const tags = await acc.call({ method: 'GET', url: '/v1/tags' });
    expect(tags.json<{ data: { name: string }[] }>().data.map((x) => x.name)).toEqual([
      'a',
      'b',
      'c',
    ]);

    const skipped = await importCsv(
      acc,
      `phone,name\n${known},X\n${known},Y\n`,
      '?on_conflict=skip',
    );
    expect(skipped).toMatchObject({ total_rows: 2, skipped: 2, updated: 0, created: 0 });
    expect(await byPhone(acc, known)).toMatchObject({ name: 'K2' });
  });

  it('fails a row whole on one bad cell (NUL, email, stage, cell count), with its line', async () => {
    const acc = await newAccount(t);
    const rows = [
      'phone,name,email,lifecycle_stage,tags',
      `${randomPhone()},Nul\u0000Name,,,`,
      `${randomPhone()},Ok,not-an-email,,`,
      `${randomPhone()},Ok,,boss,`,
      `${randomPhone()},Short`,
      '',
      `${randomPhone()},"Multi`,
      `line",,,`,
      `,Nobody,,,`,
      `${randomPhone()},Good,,customer,x;y`,
    ];
    const report = await importCsv(acc, rows.join('\n'));
    expect(report).toMatchObject({ total_rows: 7, created: 2, failed: 5 });
    expect(report.errors).toEqual([
      { line: 2, field: 'name', issue: expect.stringContaining('NUL') },
      { line: 3, field: 'email', issue: expect.any(String) },
      { line: 4, field: 'lifecycle_stage', issue: expect.any(String) },
      { line: 5, field: 'row', issue: expect.any(String) },
      { line: 9, field: 'phone', issue: expect.stringContaining('required') },
    ]);
  });

  it('a file that stops being CSV fails the import; the rows before it stay', async () => {
    const acc = await newAccount(t);
    const report = await importCsv(acc, `phone,name\n${randomPhone()},A\n${randomPhone()},"B\n`);
    expect(report.status).toBe('failed');
    expect(report.created).toBe(1);
    expect(report.errors).toEqual([{ line: 3, field: 'file', issue: expect.any(String) }]);
  });

  it('an unknown column is a 422 naming it; so is a file without phone', async () => {
    const acc = await newAccount(t);
    const res = await post(acc, 'phone,nickname\n+14155550100,x\n');
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details[0].field).toBe('header.nickname');
    expect(res.json().error.message).toContain('nickname');
    const noPhone = await post(acc, 'name\nx\n');
    expect(noPhone.statusCode).toBe(422);
    const badKey = await post(acc, 'phone,custom_fields.Bad-Key\n');
    expect(badKey.statusCode).toBe(422);
    expect((await post(acc, '')).statusCode).toBe(422);
  });

  it('takes only text/csv, up to IMPORT_MAX_BYTES', async () => {
    const acc = await newAccount(t);
    const json = await acc.call({
      method: 'POST',
      url: '/v1/contacts/imports',
      payload: { phone: '+14155550100' },
    });
    expect(json.statusCode).toBe(400);
    const big = 'phone,name\n' + `${randomPhone()},${'x'.repeat(200)}\n`.repeat(1500);
    const res = await post(acc, big);
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('payload_too_large');
  });

  it('is for admins; an agent reads an import but cannot start one', async () => {
    const acc = await newAccount(t);
    const agent = await signedInUser(t, acc, { role: 'agent' });
    const refused = await agent.call({
      method: 'POST',
      url: '/v1/contacts/imports',
      headers: { 'content-type': 'text/csv' },
      payload: 'phone\n',
    });
    expect(refused.statusCode).toBe(403);
    const admin = await signedInUser(t, acc, { role: 'admin' });
    const started = await admin.call({
      method: 'POST',
      url: '/v1/contacts/imports',
      headers: { 'content-type': 'text/csv' },
      payload: `phone\n${randomPhone()}\n`,
    });
    expect(started.statusCode, started.body).toBe(202);
    await t.services.contactImports.settled();
    const read = await agent.call({
      method: 'GET',
      url: `/v1/contacts/imports/${started.json().id}`,
    });
    expect(read.statusCode).toBe(200);
    expect(read.json().created).toBe(1);
    // The created contact's event names who imported it.
    const [event] = await eventsOf(acc.accountId, 'contact.created');
    expect((event!.data as { actor?: { id: string } }).actor?.id).toBe(admin.userId);
  });

  it('an unknown import is a 404', async () => {
    const acc = await newAccount(t);
    const res = await acc.call({ method: 'GET', url: '/v1/contacts/imports/imp_nope' });
    expect(res.statusCode).toBe(404);
  });
});

describe('GET /v1/contacts/export', () => {
  it('streams the contacts of a search as CSV that imports back unchanged', async () => {
    const acc = await newAccount(t);
    const [p1, p2, p3] = [randomPhone(), randomPhone(), randomPhone()];
    await importCsv(
      acc,
      [
        'phone,name,email,tags,lifecycle_stage,custom_fields.note,custom_fields.plan',
        `${p1},"=HYPERLINK(""x"")",a@b.co,vip;x,lead,"@risk, maybe",pro`,
        `${p2},"Smith, Jo",,vip,customer,-1,`,
        `${p3},Other,,,,,`,
      ].join('\n'),
    );
    const res = await acc.call({ method: 'GET', url: '/v1/contacts/export?tag=vip' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toContain('text/csv');
    const lines = res.body.trimEnd().split('\r\n');
    expect(lines[0]).toBe(
      'phone,name,email,tags,lifecycle_stage,custom_fields.note,custom_fields.plan',
    );
    // Newest first (both were created in one batch: id order); formulas escaped; phone as is.
    expect(lines).toContain(`${p1},"'=HYPERLINK(""x"")",a@b.co,vip;x,lead,"'@risk, maybe",pro`);
    expect(lines).toContain(`${p2},"Smith, Jo",,vip,customer,'-1,`);
    expect(lines).toHaveLength(3);
    const lead = await acc.call({ method: 'GET', url: '/v1/contacts/export?lifecycle_stage=lead' });
    expect(lead.body.trimEnd().split('\r\n')).toHaveLength(2);
    // Imported back: nothing changes.
    const again = await importCsv(acc, res.body);
    expect(again).toMatchObject({ updated: 2, failed: 0 });
    expect((await byPhone(acc, p1))!.name).toBe('=HYPERLINK("x")');
    expect((await eventsOf(acc.accountId, 'contact.updated')).length).toBe(0);
  });

  it('reads page after page (keyset) through more contacts than a page', async () => {
    const acc = await newAccount(t);
    const lines = ['phone'];
    for (let i = 0; i < 4500; i++) lines.push(randomPhone());
    await importCsv(acc, lines.join('\n'));
    const res = await acc.call({ method: 'GET', url: '/v1/contacts/export' });
    const out = res.body.trimEnd().split('\r\n');
    expect(out).toHaveLength(4501);
    expect(new Set(out).size).toBe(4501);
  });

  it('filters by channel: contacts with a conversation there', async () => {
    const acc = await newAccount(t);
    const { id, phone } = await createContact(acc);
    await receive(acc, id, 'whatsapp');
    await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone: randomPhone() } });
    const list = await acc.call({ method: 'GET', url: '/v1/contacts?channel=whatsapp' });
    expect(list.json().total).toBe(1);
    expect(list.json().data[0].phone).toBe(phone);
    expect(
      (await acc.call({ method: 'GET', url: '/v1/contacts?channel=webchat' })).json().total,
    ).toBe(0);
    const csv = await acc.call({ method: 'GET', url: '/v1/contacts/export?channel=whatsapp' });
    expect(csv.body).toContain(phone);
    const bad = await acc.call({ method: 'GET', url: '/v1/contacts?lifecycle_stage=boss' });
    expect(bad.statusCode).toBe(422);
  });

  it('an agent may export', async () => {
    const acc = await newAccount(t);
    const agent = await signedInUser(t, acc, { role: 'agent' });
    const res = await agent.call({ method: 'GET', url: '/v1/contacts/export' });
    expect(res.statusCode).toBe(200);
  });
});

describe('an import interrupted by a stop', () => {
  /** An import as a killed process leaves it: `processing`, its heartbeat `ageMs` old. */
  async function leftProcessing(acc: TestAccount, ageMs: number): Promise<string> {
    const id = `imp_left${Math.random().toString(36).slice(2, 12)}`;
    const at = new Date(Date.now() - ageMs);
    await sql`
      INSERT INTO contact_imports (account_id, id, status, on_conflict, total_rows, created, created_at, updated_at, heartbeat_at)
      VALUES (${acc.accountId}, ${id}, 'processing', 'update', 2000, 2000, ${at}, ${at}, ${at})`.execute(
      t.db,
    );
    return id;
  }

  it('is marked failed with its reason by the sweep; a running one is left', async () => {
    const acc = await newAccount(t);
    const stale = await leftProcessing(acc, 5 * 60_000);
    const alive = await leftProcessing(acc, 1_000);
    expect(await t.services.contactImports.sweep()).toBeGreaterThanOrEqual(1);
    const report = await acc.call({ method: 'GET', url: `/v1/contacts/imports/${stale}` });
    expect(report.json()).toMatchObject({
      status: 'failed',
      total_rows: 2000,
      created: 2000,
      errors: [{ line: 0, field: 'import', issue: INTERRUPTED }],
    });
    const running = await acc.call({ method: 'GET', url: `/v1/contacts/imports/${alive}` });
    expect(running.json()).toMatchObject({ status: 'processing', errors: [] });
    await sql`DELETE FROM contact_imports WHERE id = ${alive}`.execute(t.db);
  });

  it('reads as failed once its heartbeat is stale, before any sweep', async () => {
    const acc = await newAccount(t);
    const stale = await leftProcessing(acc, 5 * 60_000);
    const report = await acc.call({ method: 'GET', url: `/v1/contacts/imports/${stale}` });
    expect(report.json()).toMatchObject({ status: 'failed', errors: [{ issue: INTERRUPTED }] });
  });

  it('the workers sweep when they start', async () => {
    const acc = await newAccount(t);
    const stale = await leftProcessing(acc, 5 * 60_000);
    const stop = scheduleImportSweep(t.services.contactImports, { info: () => {}, warn: () => {} });
    try {
      await expect
        .poll(async () => {
          const rows = await sql<{ status: string }>`
            SELECT status FROM contact_imports WHERE id = ${stale}`.execute(t.db);
          return rows.rows[0]?.status;
        })
        .toBe('failed');
    } finally {
      stop();
    }
  });

  it('a live import keeps its heartbeat; one declared interrupted stops and writes no more', async () => {
    const acc = await newAccount(t);
    const res = await post(acc, `phone,name\n${randomPhone()},A\n`);
    const { id } = res.json<{ id: string }>();
    await t.services.contactImports.settled();
    const rows = await sql<{ heartbeat_at: Date | null }>`
      SELECT heartbeat_at FROM contact_imports WHERE id = ${id}`.execute(t.db);
    expect(rows.rows[0]!.heartbeat_at).toBeInstanceOf(Date);
    // A batch of an import the sweep already failed rolls back.
    const failed = await leftProcessing(acc, 5 * 60_000);
    await t.services.contactImports.sweep();
    await expect(
      t.db
        .transaction()
        .execute((trx) =>
          new ContactImportsRepository(t.db).progress(
            trx,
            acc.accountId,
            failed,
            { total_rows: 1, created: 1, updated: 0, skipped: 0, failed: 0 },
            [],
            new Date(),
          ),
        ),
    ).rejects.toBeInstanceOf(ImportEnded);
  });
});
