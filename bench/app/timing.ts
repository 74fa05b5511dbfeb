/**
 * The inbox app in Chromium (opt-in, not in CI): `npx tsx bench/app/timing.ts` after
 * `npm run build`. Prints the median of 10 of
 *  - sign-in to a painted inbox: from pressing "Sign in" to the first conversation on screen;
 *  - the first messages of a 100,000-message conversation visible: from opening its address
 *    (a new page, the app's files in the browser's cache) to its newest message on screen;
 * and the app's initial JavaScript, gzipped (as `npm run build` prints it).
 *
 * The service runs as the other benches start it (bench/lib/service.ts): on the seeded
 * database bench_inbox (127.0.0.1:5432, bench/inbox/seed.ts) when it is there and this build
 * knows every migration it has, its contact +14155550100 holding the long conversation; else
 * on a temporary embedded store where 100,000 messages are seeded with one INSERT.
 * BENCH_APP_DATABASE_URL names another seeded database; CHROMIUM_PATH another browser.
 */
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { chromium, type Browser, type Page } from 'playwright-core';
import { initialJsSize, INITIAL_JS_BUDGET } from '../../app/build.js';
import { migrations } from '../../src/db/database.js';
import { BIG_ACCOUNT_NAME, LONG_PHONE } from '../inbox/data.js';
import { openPool } from '../lib/db.js';
import { expectJson, stringField } from '../lib/http.js';
import { startService, type ServiceHandle } from '../lib/service.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RUNS = 10;
const HISTORY = 100_000;
const PASSWORD = 'bench password 0123456789';
const SEEDED_URL =
  process.env.BENCH_APP_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/bench_inbox';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Resolves on the next frame: what is in the DOM has been painted. */
const PAINTED = 'new Promise((resolve) => requestAnimationFrame(() => resolve(null)))';

const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const ms = (x: number) => `${x.toFixed(0)} ms`;

/** The seeded database, when it is there and this build knows each migration it ran. */
async function seededDatabase(): Promise<string | null> {
  const client = new pg.Client({ connectionString: SEEDED_URL, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
  } catch {
    log(`seeded database: ${new URL(SEEDED_URL).pathname.slice(1)} not reachable`);
    return null;
  }
  try {
    const ran = (await client.query<{ name: string }>('SELECT name FROM kysely_migration')).rows;
    const unknown = ran.map((r) => r.name).filter((name) => !(name in migrations));
    if (unknown.length > 0) {
      log(
        `seeded database: has migrations this build does not know (${unknown.join(', ')}): not used`,
      );
      return null;
    }
    const big = await client.query('SELECT 1 FROM accounts WHERE name = $1', [BIG_ACCOUNT_NAME]);
    return big.rowCount ? SEEDED_URL : null;
  } catch (err) {
    log(`seeded database: ${(err as Error).message}`);
    return null;
  } finally {
    await client.end();
  }
}

interface Setup {
  email: string;
  conversationId: string;
  /** How many messages the conversation holds. */
  messages: number;
}

/** A user with a password in `accountId`, made with the API (an invite, then its acceptance). */
async function makeUser(service: ServiceHandle, apiKey: string): Promise<string> {
  const email = `bench-${Date.now()}@example.com`;
  const user = await expectJson(201, `${service.url}/v1/users`, {
    method: 'POST',
    token: apiKey,
    body: { name: 'Bench Agent', email, role: 'agent' },
  });
  const token = new URL(stringField(user, 'invite_url')).hash.replace('#token=', '');
  await expectJson(201, `${service.url}/v1/invites/accept`, {
    method: 'POST',
    body: { token, password: PASSWORD },
  });
  return email;
}

/** On the seeded database: a key of the big account (as its seed makes one), a user, the long conversation. */
async function onSeeded(service: ServiceHandle, url: string): Promise<Setup> {
  const pool = openPool(url);
  try {
    const account = await pool.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [
      BIG_ACCOUNT_NAME,
    ]);
    const accountId = account.rows[0]!.id;
    const apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
    const keyId = `key_app${Date.now()}`;
    await pool.query(
      `INSERT INTO api_keys (account_id, id, name, key_hash, created_at) VALUES ($1, $2, 'bench app', $3, now())`,
      [accountId, keyId, createHash('sha256').update(apiKey).digest('hex')],
    );
    try {
      const email = await makeUser(service, apiKey);
      const found = await expectJson(
        200,
        `${service.url}/v1/conversations?q=${encodeURIComponent(LONG_PHONE)}&status=all`,
        { token: apiKey },
      );
      const conversation = (found.data as { id: string }[])[0]!;
      const count = await pool.query<{ n: string }>(
        'SELECT count(*) AS n FROM messages WHERE account_id = $1 AND conversation_id = $2',
        [accountId, conversation.id],
      );
      return { email, conversationId: conversation.id, messages: Number(count.rows[0]!.n) };
    } finally {
      // The key served the setup only (the browser signs in as the user it made).
      await pool.query('DELETE FROM api_keys WHERE account_id = $1 AND id = $2', [
        accountId,
        keyId,
      ]);
    }
  } finally {
    await pool.end();
  }
}

/** On a fresh store: 60 conversations through the sandbox, and 100,000 messages in SQL. */
async function onFresh(service: ServiceHandle): Promise<Setup> {
  const { apiKey, accountId } = await service.createAccount('bench app');
  const email = await makeUser(service, apiKey);
  let conversationId = '';
  for (let i = 0; i < 60; i++) {
    const contact = await expectJson(201, `${service.url}/v1/contacts`, {
      method: 'POST',
      token: apiKey,
      body: { phone: `+1415555${String(1000 + i).padStart(4, '0')}`, name: `Contact ${i}` },
    });
    const message = await expectJson(201, `${service.url}/v1/sandbox/inbound`, {
      method: 'POST',
      token: apiKey,
      body: { channel: 'whatsapp', contact_id: contact.id, type: 'text', content: `Hello ${i}` },
    });
    if (i === 0) conversationId = stringField(message, 'conversation_id');
  }
  const pool = openPool(await service.databaseUrl());
  try {
    await pool.query(
      `INSERT INTO messages (account_id, id, conversation_id, direction, type, content, status, created_at, updated_at)
       SELECT $1, 'msg_bench' || lpad(i::text, 7, '0'), $2,
              CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'text', 'Message ' || i,
              'delivered', now() - make_interval(secs => $3 + 60 - i), now() - make_interval(secs => $3 + 60 - i)
       FROM generate_series(1, $3::int) AS i`,
      [accountId, conversationId, HISTORY],
    );
    await pool.query('ANALYZE messages');
  } finally {
    await pool.end();
  }
  return { email, conversationId, messages: HISTORY + 1 };
}

async function signIn(page: Page, base: string, email: string): Promise<number> {
  await page.goto(`${base}/app`);
  await page.getByRole('textbox', { name: 'Email' }).fill(email);
  await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
  const start = Date.now();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('list', { name: 'Conversations' }).getByRole('listitem').first().waitFor();
  // Painted: the frame after the list is in the DOM.
  await page.evaluate(PAINTED);
  return Date.now() - start;
}

async function main(): Promise<void> {
  const js = await initialJsSize(path.join(ROOT, 'dist/app'));
  const seeded = await seededDatabase();
  log(
    `service: ${seeded ? `on ${new URL(seeded).pathname.slice(1)} (seeded)` : 'on a temporary embedded store'}`,
  );
  const service = await startService({ projectRoot: ROOT, databaseUrl: seeded, log });
  let browser: Browser | null = null;
  try {
    const setup = seeded ? await onSeeded(service, seeded) : await onFresh(service);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });

    const signIns: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      signIns.push(await signIn(await context.newPage(), service.url, setup.email));
      await context.close();
    }

    const opens: number[] = [];
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await signIn(await context.newPage(), service.url, setup.email);
    for (let i = 0; i < RUNS + 1; i++) {
      const page = await context.newPage();
      const start = Date.now();
      await page.goto(`${service.url}/app/conversations/${setup.conversationId}`);
      await page.getByRole('log', { name: 'Messages' }).getByRole('article').last().waitFor();
      await page.evaluate(PAINTED);
      // The first opening fills the browser's cache: it is not counted.
      if (i > 0) opens.push(Date.now() - start);
      await page.close();
    }
    await context.close();

    log('');
    log('The inbox app in Chromium (median of 10):');
    log(
      `  sign-in to a painted inbox:                  ${ms(median(signIns))} (min ${ms(Math.min(...signIns))}, max ${ms(Math.max(...signIns))})`,
    );
    log(
      `  first messages of a ${setup.messages.toLocaleString('en')}-message conversation: ${ms(median(opens))} (min ${ms(Math.min(...opens))}, max ${ms(Math.max(...opens))})`,
    );
    log(
      `  initial JavaScript: ${(js.gzipped / 1024).toFixed(1)} KiB gzipped (${(js.raw / 1024).toFixed(1)} KiB raw; budget ${INITIAL_JS_BUDGET / 1024} KiB)`,
    );
  } finally {
    await browser?.close();
    await service.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
