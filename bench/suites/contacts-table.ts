import { BIG, BIG_ACCOUNT_NAME, contactNameOf } from '../inbox/data.js';
import { openPool } from '../lib/db.js';
import {
  describeAnswer,
  getJson,
  measureLatencyCases,
  type LatencyCase,
} from '../lib/latency-cases.js';
import { hasSeededDatabase, seededAccount } from '../lib/seeded-account.js';
import type { Suite } from '../lib/suite.js';

/** The app's contacts table asks for pages of 50 (app/src/modules/contacts-admin). */
const PAGE = 50;
const TARGET_MS = 100;

/**
 * The admin's contacts table on the account of 1,000,000 contacts bench/inbox/seed.ts writes
 * (BENCH_DATABASE_URL): the requests the table makes, each with its exact `total`. Reads only.
 */
export const contactsTableSuite: Suite = {
  name: 'contacts-table',
  description:
    'GET /v1/contacts as the contacts table asks it (first page, page 100, search, tag, ' +
    'lifecycle stage, channel) on the seeded account of 1,000,000 contacts (needs BENCH_DATABASE_URL)',
  async run(ctx) {
    const { service, settings } = ctx;
    if (!hasSeededDatabase(ctx, 'inbox', 'contacts-table')) return;
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());
    const { accountId, apiKey } = await seededAccount(
      ctx,
      pool,
      BIG_ACCOUNT_NAME,
      'bench contacts-table suite',
    );
    // A phone of the seed's pattern (+1, an area, 3 + 4 digits): its first 8 characters.
    const phone = await pool.query<{ phone: string }>(
      `SELECT phone FROM contacts WHERE account_id = $1 AND phone IS NOT NULL ORDER BY id LIMIT 1`,
      [accountId],
    );
    const name = contactNameOf(BIG, 1);
    const list = (query: string) =>
      `${service.url}/v1/contacts?limit=${PAGE}${query === '' ? '' : `&${query}`}`;
    const plan: [string, string][] = [
      ['first page', ''],
      ['page 100', 'page=100'],
      ['search: a full name', `search=${encodeURIComponent(name)}`],
      ['search: a first name', `search=${encodeURIComponent(name.split(' ')[0]!)}`],
      [
        'search: a phone prefix',
        `search=${encodeURIComponent(phone.rows[0]?.phone.slice(0, 8) ?? '+1212')}`,
      ],
      ['tag (8 % of contacts)', 'tag=vip'],
      ['lifecycle stage (15 %)', 'lifecycle_stage=customer'],
      ['channel', 'channel=instagram'],
      ['tag and lifecycle stage', 'tag=vip&lifecycle_stage=lead'],
    ];
    const headers = { authorization: `Bearer ${apiKey}` };
    const cases: LatencyCase[] = [];
    for (const [what, query] of plan) {
      const url = list(query);
      const res = await getJson(url, headers);
      if (res.status !== 200)
        throw new Error(
          `${what}: answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`,
        );
      cases.push({
        name: what,
        url,
        headers,
        targetMs: TARGET_MS,
        shape: describeAnswer(res.body),
      });
    }
    await measureLatencyCases(ctx, cases, settings.inboxConnections);
  },
};
