import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { newAccount, type TestApp } from '../helpers.js';
import {
  completedEvents,
  createBroadcast,
  createPrivateDatabase,
  getBroadcast,
  runnerOf,
  sleep,
  startAppOn,
} from './broadcast-helpers.js';
import { TEST_SECRETS_ENV } from '../secrets-key.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = fileURLToPath(new URL('./fixtures/worker.ts', import.meta.url));
const CONTACTS = 3000;
const LEASE_MS = 1000;

let t: TestApp;
let dropDb: () => Promise<void>;
let dbUrl: string;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  dbUrl = db.url;
  t = await startAppOn(dbUrl, { broadcastBatchSize: 100 });
});
afterAll(async () => {
  await t?.close();
  await dropDb?.();
});

function startWorker(): { child: ChildProcess; exited: Promise<void>; output: () => string } {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: dbUrl,
      ...TEST_SECRETS_ENV,
      BROADCAST_BATCH_SIZE: '100',
      BROADCAST_RATE_WEBCHAT: '0',
      SANDBOX_AUTO_ADVANCE: 'false',
      WORKER_LEASE_MS: String(LEASE_MS),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, exited, output: () => output };
}

it('a worker killed with SIGKILL mid-broadcast loses no recipient and messages nobody twice (3,000 contacts)', async () => {
  const acc = await newAccount(t);
  const now = t.clock.now();
  const rows = Array.from({ length: CONTACTS }, (_, i) => ({
    account_id: acc.accountId,
    id: newId('con'),
    phone: `+1415${String(2_000_000 + i).padStart(7, '0')}`,
    tags: ['crash'],
    custom_fields: '{}',
    created_at: now,
    updated_at: now,
  }));
  await t.db.insertInto('contacts').values(rows).execute();
  // Strictly after the contacts, on the service's clock.
  while (t.clock.now().getTime() <= now.getTime()) await sleep(1);
  const b = await createBroadcast(acc, {
    audience: { tags: ['crash'] },
    channel: 'webchat',
    message: { type: 'text', content: 'Crash test' },
  });

  const counts = async () => {
    const r = await sql<{ recipients: string; messages: string }>`
        SELECT (SELECT count(*) FROM broadcast_recipients WHERE account_id = ${acc.accountId} AND broadcast_id = ${b.id}) AS recipients,
               (SELECT count(*) FROM messages WHERE account_id = ${acc.accountId} AND broadcast_id = ${b.id}) AS messages`.execute(
      t.db,
    );
    return { recipients: Number(r.rows[0]!.recipients), messages: Number(r.rows[0]!.messages) };
  };

  const worker = startWorker();
  try {
    // Kill it as soon as some recipients are committed (bounded wait: the worker must start first).
    const deadline = Date.now() + 30_000;
    while ((await counts()).recipients === 0) {
      if (worker.child.exitCode !== null)
        throw new Error(`the worker exited early:\n${worker.output()}`);
      if (Date.now() > deadline)
        throw new Error(`the worker sent nothing in 30 s:\n${worker.output()}`);
      await sleep(5);
    }
    worker.child.kill('SIGKILL');
    await worker.exited;
  } finally {
    if (worker.child.exitCode === null && worker.child.signalCode === null) {
      worker.child.kill('SIGKILL');
      await worker.exited;
    }
  }
  expect(worker.child.signalCode).toBe('SIGKILL');

  // The kill landed mid-broadcast, and every committed batch is whole.
  const atKill = await counts();
  expect(atKill.recipients).toBeGreaterThan(0);
  expect(atKill.recipients).toBeLessThan(CONTACTS);
  expect(atKill.messages).toBe(atKill.recipients);
  const mid = await getBroadcast(acc, b.id);
  expect(mid.status).toBe('sending');
  // Counted as the provider accepts: a batch killed between its commit and the provider's
  // answer is recorded (queued) but not yet sent.
  expect(mid.stats.sent).toBeLessThanOrEqual(atKill.messages);

  // The dead worker's claims (the broadcast's job and any send job of a batch in flight) hold
  // until their leases (on real time) end; then any runner takes over.
  const jobs = await t.db
    .selectFrom('jobs')
    .select(['locked_until'])
    .where('account_id', '=', acc.accountId)
    .execute();
  const lastLease = Math.max(0, ...jobs.map((j) => j.locked_until?.getTime() ?? 0));
  if (lastLease > 0)
    await sleep(Math.min(Math.max(0, lastLease - Date.now()) + 200, LEASE_MS + 500));
  const runner = runnerOf(t); // t.clock is never advanced here: real time
  for (let i = 0; i < 20 && (await getBroadcast(acc, b.id)).status === 'sending'; i++)
    await runner.drain();

  const done = await getBroadcast(acc, b.id);
  expect(done).toMatchObject({
    status: 'sent',
    stats: { sent: CONTACTS, delivered: 0, read: 0, replied: 0, failed: 0 },
  });
  expect(await counts()).toEqual({ recipients: CONTACTS, messages: CONTACTS });

  const recipients = await t.db
    .selectFrom('broadcast_recipients')
    .select(['contact_id', 'message_id', 'failure_reason'])
    .where('account_id', '=', acc.accountId)
    .where('broadcast_id', '=', b.id)
    .execute();
  expect(new Set(recipients.map((r) => r.contact_id))).toEqual(new Set(rows.map((r) => r.id)));
  expect(recipients.filter((r) => r.message_id === null || r.failure_reason !== null)).toEqual([]);

  const messages = await t.db
    .selectFrom('messages as m')
    .innerJoin('conversations as c', (j) =>
      j.onRef('c.account_id', '=', 'm.account_id').onRef('c.id', '=', 'm.conversation_id'),
    )
    .select(['m.id', 'c.contact_id'])
    .where('m.account_id', '=', acc.accountId)
    .where('m.broadcast_id', '=', b.id)
    .execute();
  expect(messages).toHaveLength(CONTACTS);
  const perContact = new Map<string, number>();
  for (const m of messages) perContact.set(m.contact_id, (perContact.get(m.contact_id) ?? 0) + 1);
  expect([...perContact.entries()].filter(([, n]) => n > 1)).toEqual([]);
  expect(perContact.size).toBe(CONTACTS);
  expect(new Set(messages.map((m) => m.id))).toEqual(new Set(recipients.map((r) => r.message_id)));

  expect(await completedEvents(t.db, acc.accountId, b.id)).toEqual([done]);
  const conversations = await t.db
    .selectFrom('conversations')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('account_id', '=', acc.accountId)
    .executeTakeFirstOrThrow();
  expect(Number(conversations.n)).toBe(CONTACTS);
}, 60_000);
