import {
  BIG_NAME,
  COMMON_FIRST,
  MEDIUM_NAME,
  contactOf,
  lastNameOf,
  BIG_COUNT,
} from '../contacts/data.js';
import { openPool } from '../lib/db.js';
import {
  describeAnswer,
  getJson,
  measureLatencyCases,
  type LatencyCase,
} from '../lib/latency-cases.js';
import { runLoad, type LoadFigures, type LoadTarget } from '../lib/load.js';
import { fmt, formatTable, median } from '../lib/report.js';
import { hasSeededDatabase, seededAccount } from '../lib/seeded-account.js';
import type { Suite } from '../lib/suite.js';

const PAGE = 50;

/**
 * `GET /v1/contacts` with exact totals on the account of 1,000,000 contacts that
 * bench/contacts/seed.ts writes (BENCH_DATABASE_URL), and `POST /v1/contacts` there against the
 * seed's account of 10,000 in the same runs.
 */
export const contactsMillionSuite: Suite = {
  name: 'contacts-million',
  description:
    'GET /v1/contacts (first page, page 1,000, a tag, searches matching 0.1 %, 10 %) on the seeded ' +
    'account of 1,000,000 contacts, and POST /v1/contacts there against one of 10,000 ' +
    '(needs BENCH_DATABASE_URL of bench/contacts/seed.ts)',
  async run(ctx) {
    const { service, settings } = ctx;
    if (!hasSeededDatabase(ctx, 'contacts', 'contacts-million')) return;
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());
    const big = await seededAccount(ctx, pool, BIG_NAME, 'bench contacts-million suite');
    const medium = await seededAccount(ctx, pool, MEDIUM_NAME, 'bench contacts-million suite');

    // Search terms of known reach: a full name, a last name (each on ~0.1 %), the common first
    // name (10 %).
    const sample = contactOf(0, BIG_COUNT, 12_345, Date.now());
    const lastName = sample.name.split(' ')[1] ?? lastNameOf(0);
    const plan: [string, string, number][] = [
      ['first page', '', 50],
      ['page 1,000', 'page=1000', 50],
      ['tag (the commonest)', 'tag=tag-01', 50],
      ['tag (a rare one)', 'tag=tag-50', 50],
      ['search: a full name', `search=${encodeURIComponent(sample.name)}`, 50],
      ['search: a last name (0.1 %)', `search=${encodeURIComponent(lastName)}`, 50],
      ['search: a phone prefix', `search=${encodeURIComponent(sample.phone.slice(0, 9))}`, 50],
      [`search: "${COMMON_FIRST}" (10 %)`, `search=${COMMON_FIRST}`, 200],
    ];
    const headers = { authorization: `Bearer ${big.apiKey}` };
    const cases: LatencyCase[] = [];
    for (const [what, query, targetMs] of plan) {
      const url = `${service.url}/v1/contacts?limit=${PAGE}${query === '' ? '' : `&${query}`}`;
      const res = await getJson(url, headers);
      if (res.status !== 200)
        throw new Error(
          `${what}: answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`,
        );
      cases.push({ name: what, url, headers, targetMs, shape: describeAnswer(res.body) });
    }
    await measureLatencyCases(ctx, cases, settings.inboxConnections);

    // Creates: the same requests in the account of a million and in the one of ten thousand,
    // interleaved round by round. Phones of a range the seed never uses (+1999…).
    let next = Math.floor(Date.now() / 1000) % 1_000_000;
    const creates = (apiKey: string, name: string): LoadTarget => ({
      name,
      url: service.url,
      requests: [
        {
          method: 'POST',
          path: '/v1/contacts',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          setupRequest: (req) => {
            const n = next++ % 10_000_000;
            req.body = JSON.stringify({
              phone: `+1999${String(n).padStart(7, '0')}`,
              name: `Bench Create ${n}`,
              tags: ['tag-07'],
            });
            return req;
          },
        },
      ],
      expectedStatuses: [201],
    });
    const targets = [
      creates(big.apiKey, 'POST /v1/contacts, 1,000,000 contacts'),
      creates(medium.apiKey, 'POST /v1/contacts, 10,000 contacts'),
    ];
    const load = { durationS: settings.durationS, connections: settings.inboxConnections };
    for (const t of targets) await runLoad(t, { ...load, durationS: settings.warmupS || 1 });
    const runs: LoadFigures[][] = targets.map(() => []);
    for (let round = 1; round <= settings.runs; round++) {
      for (const [i, t] of targets.entries()) {
        const f = await runLoad(t, load);
        ctx.log(
          `  ${t.name}  run ${round}/${settings.runs}: ${f.reqPerSec.toFixed(0)} req/s, ` +
            `p50 ${f.p50Ms.toFixed(2)} ms, p99 ${f.p99Ms.toFixed(2)} ms`,
        );
        runs[i]!.push(f);
      }
    }
    const med = (i: number, f: (r: LoadFigures) => number) => median(runs[i]!.map(f));
    ctx.log('');
    ctx.log(
      formatTable(
        ['creates', 'req/s', 'p50 ms', 'p99 ms'],
        targets.map((t, i) => [
          t.name,
          med(i, (r) => r.reqPerSec).toFixed(0),
          fmt(
            med(i, (r) => r.p50Ms),
            2,
          ),
          fmt(
            med(i, (r) => r.p99Ms),
            2,
          ),
        ]),
      ),
    );
    const ratio = med(0, (r) => r.reqPerSec) / med(1, (r) => r.reqPerSec);
    ctx.log(
      `creates at a million / at ten thousand: ${ratio.toFixed(2)}× the requests a second, ` +
        `p50 ${(med(0, (r) => r.p50Ms) / med(1, (r) => r.p50Ms)).toFixed(2)}× (target: within 20 %)`,
    );
    // What the creates added goes again: the seeded accounts stay as seeded.
    await pool.query(
      `DELETE FROM contacts WHERE account_id = ANY($1::text[]) AND phone LIKE '+1999%'`,
      [[big.accountId, medium.accountId]],
    );
  },
};
