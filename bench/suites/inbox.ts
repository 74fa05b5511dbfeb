import { randomBytes } from 'node:crypto';
import {
  BIG_ACCOUNT_NAME,
  LONG_PHONE,
  SMALL_ACCOUNT_PREFIX,
  contactNameOf,
  smallShape,
  BIG,
} from '../inbox/data.js';
import { openPool } from '../lib/db.js';
import { hasSeededDatabase, seededAccount } from '../lib/seeded-account.js';
import { requestJson } from '../lib/http.js';
import { describeAnswer, getJson, measureLatencyCases } from '../lib/latency-cases.js';
import { fmtInt } from '../lib/report.js';
import { newSignedInAgent, reinvitedUser, type SignedIn } from '../lib/session.js';
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
  /** A signed-in user's session cookie, in place of the account's API key. */
  session?: SignedIn;
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
  // The signed-in users' requests count against SESSION_RATE_LIMIT_PER_MINUTE (1,200 a minute
  // per user by default), which the measurements would pass in seconds.
  serviceEnv: { SESSION_RATE_LIMIT_PER_MINUTE: '1000000' },
  async run(ctx) {
    const { service, settings } = ctx;
    if (!hasSeededDatabase(ctx, 'inbox', 'inbox')) return;
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    const account = async (label: string, name: string): Promise<InboxAccount> => {
      const { accountId, apiKey } = await seededAccount(ctx, pool, name, 'bench inbox suite');
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

    // Signed-in users of the big account (view=mine, counts.mine): one made for this run through
    // the API, and the seeded agent with the most open conversations, given a password through
    // a new invite. Both are put back at the end (the new one removed through the API; the
    // seeded one's password, invites and sessions removed).
    const password = randomBytes(18).toString('base64url');
    const fresh = await newSignedInAgent(service.url, big.apiKey, big.accountId, {
      name: 'Bench Inbox Agent',
      email: `bench-inbox-${randomBytes(6).toString('hex')}@example.com`,
      password,
    });
    ctx.defer(async () => {
      await requestJson(`${service.url}/v1/users/${fresh.userId}`, {
        method: 'DELETE',
        token: big.apiKey,
      });
    });
    const busiest = await pool.query<{ id: string; email: string; open: string }>(
      `SELECT u.id, u.email, count(*) AS open FROM users u
       JOIN conversations c ON c.account_id = u.account_id AND c.assignee_type = 'user'
                            AND c.assignee_id = u.id AND c.status = 'open'
       WHERE u.account_id = $1 GROUP BY u.id, u.email ORDER BY count(*) DESC, u.id LIMIT 1`,
      [big.accountId],
    );
    const seededUser = busiest.rows[0];
    if (!seededUser) throw new Error('the big account has no user with open conversations');
    ctx.defer(async () => {
      await pool.query('DELETE FROM sessions WHERE account_id = $1 AND user_id = $2', [
        big.accountId,
        seededUser.id,
      ]);
      await pool.query('DELETE FROM invites WHERE account_id = $1 AND user_id = $2', [
        big.accountId,
        seededUser.id,
      ]);
      await pool.query('UPDATE users SET password_hash = NULL WHERE account_id = $1 AND id = $2', [
        big.accountId,
        seededUser.id,
      ]);
    });
    const seeded = await reinvitedUser(service.url, big.apiKey, big.accountId, {
      id: seededUser.id,
      email: seededUser.email,
      password,
    });
    const seededAll = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM conversations
       WHERE account_id = $1 AND assignee_type = 'user' AND assignee_id = $2`,
      [big.accountId, seededUser.id],
    );
    ctx.log(
      `signed in (POST /v1/users or /v1/users/{id}/invite, /v1/invites/accept, /v1/session): ` +
        `a new agent ${fresh.userId} (no conversations), and the seeded agent ${seeded.userId} ` +
        `(${fmtInt(Number(seededUser.open))} open conversations, ${fmtInt(Number(seededAll.rows[0]?.n))} in all)`,
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
      list.push({
        name: `${a.label}: GET /v1/conversations/counts`,
        path: '/v1/conversations/counts',
        targetMs: 50,
      });
      if (a === big)
        for (const [who, session] of [
          ['seeded agent', seeded],
          ['new agent', fresh],
        ] as const)
          list.push(
            {
              name: `${a.label}, ${who}'s session: view=mine, open`,
              path: '/v1/conversations?view=mine&status=open&sort=last_activity',
              targetMs: 50,
              session,
            },
            {
              name: `${a.label}, ${who}'s session: /counts (mine too)`,
              path: '/v1/conversations/counts',
              targetMs: 50,
              session,
            },
          );
      list.push({
        name: `${a.label}: newest 50 of ${fmtInt(a.longMessages)} messages`,
        path: `/v1/conversations/${a.longConversation}/messages?limit=50`,
        targetMs: 20,
      });
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
    const headersOf = (a: InboxAccount, c: InboxCase): Record<string, string> =>
      c.session ? { cookie: c.session.cookie } : { authorization: `Bearer ${a.apiKey}` };
    for (const { account: a, c } of plan) {
      const res = await getJson(`${service.url}${c.path}`, headersOf(a, c));
      if (res.status !== 200)
        throw new Error(
          `${c.name}: GET ${c.path} answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`,
        );
      c.shape = describeAnswer(res.body);
    }

    await measureLatencyCases(
      ctx,
      plan.map(({ account: a, c }) => ({
        name: c.name,
        url: `${service.url}${c.path}`,
        headers: headersOf(a, c),
        targetMs: c.targetMs,
        shape: c.shape ?? '',
      })),
      settings.inboxConnections,
    );
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
