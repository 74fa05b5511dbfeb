import { openPool } from '../lib/db.js';
import { fmt, fmtInt, formatTable, median } from '../lib/report.js';
import type { Suite } from '../lib/suite.js';

const REQUESTS_PER_CASE = 15;
const CHUNK = 100_000;

/**
 * GET /v1/contacts with a search or a tag on a large account: one request at a time, so the
 * figure is the latency of one list, `total` (an exact count) included.
 */
export const searchSuite: Suite = {
  name: 'search',
  description:
    'GET /v1/contacts with search and tag filters on one account of 1,000,000 contacts (latency of one request)',
  async run(ctx) {
    const { service, settings } = ctx;
    const n = settings.searchContacts;
    const account = await service.createAccount('bench search');
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    // Seeded by the database itself: names are "Contact <md5 of i>", 1% of contacts tagged vip.
    const seedStart = performance.now();
    for (let from = 1; from <= n; from += CHUNK) {
      await pool.query(
        `INSERT INTO contacts (account_id, id, phone, name, tags, custom_fields, created_at, updated_at)
         SELECT $1, 'con_bench' || lpad(i::text, 10, '0'), '+1212' || lpad(i::text, 7, '0'),
                'Contact ' || md5(i::text), CASE WHEN i % 100 = 0 THEN ARRAY['vip'] ELSE ARRAY['all'] END,
                '{}', now() - make_interval(secs => i), now()
         FROM generate_series($2::int, $3::int) AS i`,
        [account.accountId, from, Math.min(n, from + CHUNK - 1)],
      );
    }
    await pool.query('ANALYZE contacts');
    ctx.log(
      `seeded ${fmtInt(n)} contacts in ${fmt((performance.now() - seedStart) / 1000)} s (SQL, then ANALYZE)`,
    );

    const cases: [string, string][] = [
      ['search matching nothing', 'search=zzqx'],
      ['search matching about 1 in 4,096 names', 'search=abc1'],
      ['search by phone digits', `search=${encodeURIComponent('2120000')}`],
      ['search matching about 1 in 16 names', `search=${encodeURIComponent('contact 0')}`],
      ['tag held by 1%', 'tag=vip'],
      ['no filter', ''],
    ];
    const rows: string[][] = [];
    for (const [name, query] of cases) {
      const times: number[] = [];
      let total = 0;
      for (let i = 0; i < REQUESTS_PER_CASE; i++) {
        const started = performance.now();
        const res = await fetch(`${service.url}/v1/contacts?limit=20${query ? `&${query}` : ''}`, {
          headers: { authorization: `Bearer ${account.apiKey}` },
        });
        const body = (await res.json()) as { total?: number };
        times.push(performance.now() - started);
        if (res.status !== 200) throw new Error(`search bench: ${name} answered ${res.status}`);
        total = Number(body.total);
      }
      times.sort((a, b) => a - b);
      rows.push([
        name,
        `?limit=20${query ? `&${query}` : ''}`,
        fmtInt(total),
        fmt(median(times)),
        fmt(times.at(-1) ?? NaN),
      ]);
    }
    ctx.log('');
    ctx.log(formatTable(['case', 'query', 'total', 'median ms', 'max ms'], rows));
    ctx.log(
      `(${REQUESTS_PER_CASE} sequential requests a case; total is an exact count, so its cost grows with the matches)`,
    );
  },
};
