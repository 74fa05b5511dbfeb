import { createHash, randomBytes } from 'node:crypto';
import {
  BIG_ACCOUNT_NAME,
  LONG_PHONE,
  SMALL_ACCOUNT_PREFIX,
  contactNameOf,
  smallShape,
  BIG,
} from '../inbox/data.js';
import { openPool } from '../lib/db.js';
import { requestJson } from '../lib/http.js';
import { runLoad, type LoadFigures, type LoadTarget } from '../lib/load.js';
import { fmt, fmtInt, formatTable, median } from '../lib/report.js';
import type { Suite } from '../lib/suite.js';

const LIST = '/v1/conversations?view=unassigned&status=open&sort=last_activity';

interface InboxAccount {
  label: string;
  accountId: string;
  apiKey: string;
  /** The conversation of LONG_PHONE's contact: 100,000 messages in the big account, 200 in a small one. */
  longConversation: string;
  longMessages: number;
}

interface InboxCase {
  name: string;
  path: string;
  targetMs: number;
  /** What the first answer said of the list: total and rows, or the messages of a page. */
  shape?: string;
}

/**
 * The agent inbox on the database seeded by bench/inbox/seed.ts (BENCH_DATABASE_URL): list
 * views, search, counts and the newest page of a 100,000-message conversation, on the big
 * account and on a small one in the same run. Reads only, so the seeded rows stay as they are.
 */
export const inboxSuite: Suite = {
  name: 'inbox',
  description:
    'GET /v1/conversations views, q, /counts and the newest history page on the seeded account ' +
    'of 1,000,000 conversations, beside a small account (needs BENCH_DATABASE_URL, see bench/inbox/seed.ts)',
  async run(ctx) {
    const { service, settings } = ctx;
    if (settings.databaseUrl === null) {
      // Not a failure: a run of every suite on the embedded store goes on without it.
      ctx.log(
        'skipped: the inbox suite reads the seeded database. Run "npx tsx bench/inbox/seed.ts" once, ' +
          'then BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_inbox npx tsx bench/run.ts inbox',
      );
      return;
    }
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    // A key of each account for this run (as the service stores them: the SHA-256 only),
    // removed when the suite ends.
    const keyIds: string[] = [];
    ctx.defer(async () => {
      await pool.query('DELETE FROM api_keys WHERE id = ANY($1::text[])', [keyIds]);
    });
    const account = async (label: string, name: string): Promise<InboxAccount> => {
      const found = await pool.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [
        name,
      ]);
      const accountId = found.rows[0]?.id;
      if (accountId === undefined) {
        throw new Error(
          `no account "${name}" in ${service.database}: seed it first (npx tsx bench/inbox/seed.ts)`,
        );
      }
      const apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
      const keyId = `key_bench_inbox_${randomBytes(8).toString('hex')}`;
      await pool.query(
        `INSERT INTO api_keys (account_id, id, name, key_hash, created_at)
         VALUES ($1, $2, 'bench inbox suite', $3, now())`,
        [accountId, keyId, createHash('sha256').update(apiKey).digest('hex')],
      );
      keyIds.push(keyId);
      const long = await pool.query<{ id: string; n: string }>(
        `SELECT c.id, (SELECT count(*) FROM messages m
                       WHERE m.account_id = c.account_id AND m.conversation_id = c.id) AS n
         FROM contacts k
         JOIN conversations c ON c.account_id = k.account_id AND c.contact_id = k.id
         WHERE k.account_id = $1 AND k.phone = $2`,
        [accountId, LONG_PHONE],
      );
      const row = long.rows[0];
      if (!row) throw new Error(`${name}: no conversation with ${LONG_PHONE}`);
      return {
        label,
        accountId,
        apiKey,
        longConversation: row.id,
        longMessages: Number(row.n),
      };
    };
    const big = await account('big', BIG_ACCOUNT_NAME);
    const small = await account('small', `${SMALL_ACCOUNT_PREFIX} 01`);
    const sizes = await pool.query<{ conversations: string; open: string; messages: string }>(
      `SELECT (SELECT count(*) FROM conversations WHERE account_id = $1) AS conversations,
              (SELECT count(*) FROM conversations WHERE account_id = $1 AND status = 'open') AS open,
              (SELECT reltuples::bigint FROM pg_class WHERE relname = 'messages') AS messages`,
      [big.accountId],
    );
    const s = sizes.rows[0];
    ctx.log(
      `big account ${big.accountId}: ${fmtInt(Number(s?.conversations))} conversations ` +
        `(${fmtInt(Number(s?.open))} open), about ${fmtInt(Number(s?.messages))} messages in the ` +
        `database; its long conversation ${big.longConversation} has ${fmtInt(big.longMessages)}`,
    );
    ctx.log(
      `small account ${small.accountId} (one of 99): its long conversation has ${fmtInt(small.longMessages)} messages`,
    );

    // Names to search for, as the seed wrote them: a contact of the big account with an open
    // conversation, and the first letters of its first name.
    const q = await searchSupport(service.url, big.apiKey);
    ctx.log(
      q === null
        ? 'q: supported by this build of GET /v1/conversations'
        : `q: skipped (${q}); contact_id (one contact's conversations) is measured in its place`,
    );

    const cases = (a: InboxAccount, name: string): InboxCase[] => {
      const first = name.split(' ')[0] ?? name;
      const list: InboxCase[] = [
        { name: `${a.label}: unassigned open, page 1`, path: LIST, targetMs: 50 },
      ];
      if (a === big)
        list.push({
          name: `${a.label}: unassigned open, page 50`,
          path: `${LIST}&page=50`,
          targetMs: 50,
        });
      if (q === null) {
        list.push(
          {
            name: `${a.label}: q=<full name>, all statuses`,
            path: `/v1/conversations?status=all&sort=last_activity&q=${encodeURIComponent(name)}`,
            targetMs: 50,
          },
          {
            name: `${a.label}: q=<first 4 letters>, open`,
            path: `/v1/conversations?status=open&sort=last_activity&q=${encodeURIComponent(first.slice(0, 4).toLowerCase())}`,
            targetMs: 50,
          },
        );
      }
      list.push(
        {
          name: `${a.label}: GET /v1/conversations/counts`,
          path: '/v1/conversations/counts',
          targetMs: 50,
        },
        {
          name: `${a.label}: newest 50 of ${fmtInt(a.longMessages)} messages`,
          path: `/v1/conversations/${a.longConversation}/messages?limit=50`,
          targetMs: 20,
        },
      );
      return list;
    };
    const contactCase = async (a: InboxAccount): Promise<InboxCase> => {
      const c = await pool.query<{ contact_id: string }>(
        'SELECT contact_id FROM conversations WHERE account_id = $1 AND id = $2',
        [a.accountId, a.longConversation],
      );
      return {
        name: `${a.label}: contact_id=<one contact>, all statuses`,
        path: `/v1/conversations?status=all&sort=last_activity&contact_id=${c.rows[0]?.contact_id ?? ''}`,
        targetMs: 50,
      };
    };
    const plan: Array<{ account: InboxAccount; c: InboxCase }> = [];
    for (const [a, name] of [
      [big, contactNameOf(BIG, 1)],
      [small, contactNameOf(smallShape(1), 1)],
    ] as const) {
      for (const c of cases(a, name)) plan.push({ account: a, c });
      if (q !== null) plan.push({ account: a, c: await contactCase(a) });
    }

    // What each answers (a wrong status fails the run here, before any measurement).
    for (const { account: a, c } of plan) {
      const res = await requestJson(`${service.url}${c.path}`, {
        token: a.apiKey,
        timeoutMs: 60_000,
      });
      if (res.status !== 200)
        throw new Error(
          `${c.name}: GET ${c.path} answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`,
        );
      c.shape = describe(res.body);
    }

    const connections = settings.inboxConnections;
    const targets: LoadTarget[] = plan.map(({ account: a, c }) => ({
      name: c.name,
      url: `${service.url}${c.path}`,
      headers: { authorization: `Bearer ${a.apiKey}` },
      expectedStatuses: [200],
    }));
    const load = { durationS: settings.durationS, connections };
    if (settings.warmupS > 0) {
      for (const target of targets) {
        ctx.log(`warming up ${target.name}`);
        await runLoad(target, { durationS: settings.warmupS, connections });
      }
    }
    // Interleaved rounds, as measureAgainstBaseline runs them: drift hits every target alike.
    const runs: LoadFigures[][] = targets.map(() => []);
    for (let round = 1; round <= settings.runs; round++) {
      for (const [i, target] of targets.entries()) {
        const f = await runLoad(target, load);
        ctx.log(
          `  ${target.name}  run ${round}/${settings.runs}: ${f.reqPerSec.toFixed(0)} req/s, ` +
            `p50 ${f.p50Ms.toFixed(2)} ms, p99 ${f.p99Ms.toFixed(2)} ms, ${f.total} responses`,
        );
        runs[i]!.push(f);
      }
    }

    const rows = plan.map(({ c }, i) => {
      const own = runs[i]!;
      const p99 = median(own.map((r) => r.p99Ms));
      return [
        c.name,
        median(own.map((r) => r.reqPerSec)).toFixed(0),
        fmt(median(own.map((r) => r.p50Ms)), 2),
        fmt(p99, 2),
        own.map((r) => fmt(r.p99Ms, 1)).join(' / '),
        `< ${c.targetMs}`,
        p99 < c.targetMs ? 'yes' : 'NO',
        c.shape ?? '',
      ];
    });
    ctx.log('');
    ctx.log(
      formatTable(
        ['target', 'req/s', 'p50 ms', 'p99 ms', 'p99 of each run', 'target', 'met', 'answer'],
        rows,
      ),
    );
    ctx.log(
      `(medians of ${settings.runs} interleaved runs of ${settings.durationS} s, ${connections} ` +
        `connection${connections === 1 ? '' : 's'} (BENCH_INBOX_CONNECTIONS); paths:`,
    );
    for (const { account: a, c } of plan) ctx.log(`  ${a.label}: GET ${c.path}`);
    ctx.log(')');
  },
};

/** null when GET /v1/conversations takes `q`; otherwise why it is skipped. */
async function searchSupport(baseUrl: string, apiKey: string): Promise<string | null> {
  const res = await requestJson(`${baseUrl}/v1/conversations?q=zz&limit=1`, { token: apiKey });
  if (res.status === 422) return 'this build answers 422 to q';
  // A build that ignored unknown parameters would answer 200: its API document decides.
  const doc = await requestJson(`${baseUrl}/v1/openapi.json`);
  const params = (
    doc.body as {
      paths?: Record<string, { get?: { parameters?: Array<{ name?: string }> } }>;
    } | null
  )?.paths?.['/v1/conversations']?.get?.parameters;
  if (!params?.some((p) => p.name === 'q'))
    return 'the API document has no q on GET /v1/conversations';
  return null;
}

/** "total 41,000, 20 rows" for a list, "50 messages, has_more" for history, the counts as they are. */
function describe(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const b = body as Record<string, unknown>;
  if (Array.isArray(b.data) && typeof b.total === 'number')
    return `total ${fmtInt(b.total)}, ${b.data.length} rows`;
  if (Array.isArray(b.data))
    return `${b.data.length} messages${b.has_more === true ? ', more' : ''}`;
  return JSON.stringify(b);
}
