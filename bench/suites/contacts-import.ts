import { createReadStream, createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { openPool } from '../lib/db.js';
import { fmt, fmtInt, formatTable } from '../lib/report.js';
import { readRssBytes, RssSampler } from '../lib/rss.js';
import type { BenchContext, Suite } from '../lib/suite.js';

const CHUNK = 100_000;

function count(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new Error(`${name} must be a whole number ≥ 1`);
  return Number(raw);
}

/**
 * CSV import and export of contacts: `POST /v1/contacts/imports` of a file of
 * BENCH_IMPORT_ROWS rows (100,000; rows a second from the upload to `completed`, and how much
 * the service's memory grew meanwhile), then `GET /v1/contacts/export` of an account of
 * BENCH_EXPORT_CONTACTS contacts (1,000,000, seeded by SQL; rows a second, read as it streams).
 */
export const contactsImportSuite: Suite = {
  name: 'contacts-import',
  description:
    'CSV import of 100,000 rows (rows/s, service RSS growth) and export of 1,000,000 contacts (rows/s)',
  async run(ctx) {
    const { service } = ctx;
    const importRows = count('BENCH_IMPORT_ROWS', 100_000);
    const exportContacts = count('BENCH_EXPORT_CONTACTS', 1_000_000);
    const dir = mkdtempSync(path.join(tmpdir(), 'switchboard-bench-import-'));
    ctx.defer(async () => rmSync(dir, { recursive: true, force: true }));
    const rows: string[][] = [];

    // A first, smaller import warms the service up (its code compiled, its heap grown to its
    // working size) so that the measured one's growth is the import's, not the first start's.
    const warmup = await timedImport(ctx, dir, count('BENCH_IMPORT_WARMUP_ROWS', 10_000), 1647);
    const measured = await timedImport(ctx, dir, importRows, 1646);
    for (const [what, r] of [
      ['warm-up', warmup],
      ['measured', measured],
    ] as const) {
      rows.push([
        `POST /v1/contacts/imports (${fmtInt(r.rows)} rows, ${what})`,
        fmt(r.seconds),
        fmtInt(r.rows / r.seconds),
        `${fmt((r.peak - r.before) / 1e6)} MB (${fmt(r.before / 1e6)} → ${fmt(r.peak / 1e6)})`,
      ]);
    }

    // The export: an account of exportContacts contacts, seeded by SQL.
    const big = await service.createAccount('bench contacts export');
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());
    const seedStart = performance.now();
    for (let from = 1; from <= exportContacts; from += CHUNK) {
      await pool.query(
        `INSERT INTO contacts (account_id, id, phone, name, email, tags, lifecycle_stage, custom_fields, created_at, updated_at)
         SELECT $1, 'con_exp' || lpad(i::text, 10, '0'), '+1213' || lpad(i::text, 7, '0'),
                'Contact ' || md5(i::text), 'c' || i || '@example.com',
                CASE WHEN i % 100 = 0 THEN ARRAY['vip'] ELSE ARRAY['all'] END, 'customer',
                jsonb_build_object('plan', 'pro'), now() - make_interval(secs => i), now()
         FROM generate_series($2::int, $3::int) AS i`,
        [big.accountId, from, Math.min(exportContacts, from + CHUNK - 1)],
      );
    }
    await pool.query('ANALYZE contacts');
    ctx.log(
      `seeded ${fmtInt(exportContacts)} contacts in ${fmt((performance.now() - seedStart) / 1000)} s (SQL, then ANALYZE)`,
    );
    const exportSampler = new RssSampler(service.pid, 100);
    const exportBefore = (await readRssBytes(service.pid)) ?? NaN;
    exportSampler.start();
    const exportStart = performance.now();
    const exported = await fetch(`${service.url}/v1/contacts/export`, {
      headers: { authorization: `Bearer ${big.apiKey}` },
    });
    if (exported.status !== 200 || !exported.body)
      throw new Error(`export answered ${exported.status}`);
    let lines = 0;
    let firstByte = NaN;
    for await (const chunk of exported.body as unknown as AsyncIterable<Uint8Array>) {
      if (Number.isNaN(firstByte)) firstByte = performance.now() - exportStart;
      for (let i = chunk.indexOf(0x0a); i !== -1; i = chunk.indexOf(0x0a, i + 1)) lines++;
    }
    const exportSeconds = (performance.now() - exportStart) / 1000;
    await exportSampler.stop();
    const exportPeak = exportSampler.peakSince(exportStart);
    if (lines - 1 !== exportContacts)
      throw new Error(`the export had ${lines - 1} rows, not ${exportContacts}`);
    ctx.log(
      `export: ${fmt(exportSeconds)} s, ${fmtInt(exportContacts / exportSeconds)} rows/s, service RSS ${fmt(exportBefore / 1e6)} → peak ${fmt(exportPeak / 1e6)} MB`,
    );
    rows.push([
      `GET /v1/contacts/export (${fmtInt(exportContacts)} contacts)`,
      fmt(exportSeconds),
      fmtInt(exportContacts / exportSeconds),
      `${fmt((exportPeak - exportBefore) / 1e6)} MB (${fmt(exportBefore / 1e6)} → ${fmt(exportPeak / 1e6)})`,
    ]);
    ctx.log(`export: first byte after ${fmt(firstByte)} ms`);
    ctx.log('');
    ctx.log(formatTable(['case', 'seconds', 'rows/s', 'service RSS growth (peak)'], rows));
  },
};

/**
 * A file of `rows` rows (a tenth repeat a phone of the file, so they update) imported into a
 * new account, timed from the upload to `completed`, with the service's RSS sampled meanwhile.
 */
async function timedImport(ctx: BenchContext, dir: string, rows: number, area: number) {
  const { service } = ctx;
  const file = path.join(dir, `contacts-${area}.csv`);
  const out = createWriteStream(file);
  out.write('phone,name,email,tags,lifecycle_stage,custom_fields.plan,custom_fields.city\r\n');
  for (let i = 0; i < rows; i++) {
    const n = i % 10 === 9 ? i - 5 : i;
    const phone = `+1${area}${String(n).padStart(7, '0')}`;
    out.write(
      `${phone},Imported Person ${n},person${n}@example.com,import;batch${i % 7},lead,pro,City ${i % 100}\r\n`,
    );
  }
  out.end();
  await finished(out);
  const bytes = statSync(file).size;

  const account = await service.createAccount(`bench contacts import ${area}`);
  const auth = { authorization: `Bearer ${account.apiKey}` };
  const sampler = new RssSampler(service.pid, 100);
  const before = (await readRssBytes(service.pid)) ?? NaN;
  sampler.start();
  const started = performance.now();
  const res = await fetch(`${service.url}/v1/contacts/imports`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'text/csv' },
    body: Readable.toWeb(createReadStream(file)) as ReadableStream,
    duplex: 'half',
  });
  if (res.status !== 202) throw new Error(`import answered ${res.status}: ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  const uploaded = performance.now();
  let report: Record<string, unknown> = {};
  const deadline = Date.now() + ctx.settings.waitTimeoutS * 1000;
  for (;;) {
    const poll = await fetch(`${service.url}/v1/contacts/imports/${id}`, { headers: auth });
    report = (await poll.json()) as Record<string, unknown>;
    if (report.status !== 'processing') break;
    if (Date.now() > deadline) throw new Error('the import did not finish in time');
    await new Promise((r) => setTimeout(r, 100));
  }
  const seconds = (performance.now() - started) / 1000;
  await sampler.stop();
  const peak = sampler.peakSince(started);
  if (report.status !== 'completed' || report.failed !== 0)
    throw new Error(`the import ended ${JSON.stringify(report).slice(0, 500)}`);
  ctx.log(
    `import ${id}: ${fmtInt(rows)} rows, ${fmt(bytes / 1e6)} MB; created ${fmtInt(Number(report.created))}, updated ${fmtInt(Number(report.updated))}; upload ${fmt((uploaded - started) / 1000)} s`,
  );
  ctx.log(
    `import: ${fmt(seconds)} s, ${fmtInt(rows / seconds)} rows/s, service RSS ${fmt(before / 1e6)} → peak ${fmt(peak / 1e6)} MB`,
  );
  return { rows, seconds, before, peak };
}
