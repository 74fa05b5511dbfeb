import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { PURGE_BATCH } from '../../src/webhooks/webhooks.repository.js';
import { newAccount, type TestAccount } from '../helpers.js';
import { expectStatus } from '../inbox-helpers.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';

let t: WebhookTestApp;
beforeAll(async () => {
  t = await startWebhookTestApp();
  // Which transaction deleted how many rows of each table (this file's database alone).
  await sql`
    CREATE TABLE deletions_seen (tbl text, xid xid8, n bigint);
    CREATE FUNCTION note_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO deletions_seen SELECT TG_TABLE_NAME, pg_current_xact_id(), count(*) FROM gone;
      RETURN NULL;
    END $$;
    CREATE TRIGGER note_deletion AFTER DELETE ON webhooks
      REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION note_deletion();
    CREATE TRIGGER note_deletion AFTER DELETE ON webhook_deliveries
      REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION note_deletion();
    CREATE TRIGGER note_deletion AFTER DELETE ON webhook_attempts
      REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION note_deletion();
  `.execute(t.db);
});
afterAll(() => t.close());

async function webhook(acc: TestAccount): Promise<string> {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/webhooks',
    payload: { url: 'https://hooks.example.com/x', events: ['contact.created'] },
  });
  expectStatus(res, 201);
  return res.json<{ id: string }>().id;
}

/** `n` deliveries (a third pending) and `n` logged attempts of the webhook, written directly. */
async function history(acc: TestAccount, webhookId: string, n: number, from = 0): Promise<void> {
  await sql`
    INSERT INTO webhook_deliveries (account_id, webhook_id, event_id, event_type, state, attempts, next_attempt_at, created_at, updated_at)
    SELECT ${acc.accountId}, ${webhookId}, 'evt_' || lpad(i::text, 8, '0'), 'contact.created',
           CASE WHEN i % 3 = 0 THEN 'pending' ELSE 'failed' END, 1, now() + interval '1 day', now(), now()
    FROM generate_series(${from}::int, ${from + n - 1}::int) i`.execute(t.db);
  await sql`
    INSERT INTO webhook_attempts (account_id, id, webhook_id, event_id, event_type, attempt, status_code, error, duration_ms, created_at)
    SELECT ${acc.accountId}, 'dlv_' || md5(${webhookId} || i::text), ${webhookId}, 'evt_' || lpad(i::text, 8, '0'),
           'contact.created', 1, 500, NULL, 12, now()
    FROM generate_series(${from}::int, ${from + n - 1}::int) i`.execute(t.db);
}

const left = async (webhookId: string) => {
  const { rows } = await sql<{ d: number; a: number }>`
    SELECT (SELECT count(*)::int FROM webhook_deliveries WHERE webhook_id = ${webhookId}) AS d,
           (SELECT count(*)::int FROM webhook_attempts WHERE webhook_id = ${webhookId}) AS a`.execute(
    t.db,
  );
  return rows[0]!;
};

const runJobs = (accountId: string) =>
  new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
    accountId,
  }).drain();

describe('DELETE /v1/webhooks/{id} with a long history', () => {
  it('deletes the webhook in a transaction of its own, then its deliveries and log in batches of their own', async () => {
    const acc = await newAccount(t);
    const doomed = await webhook(acc);
    const kept = await webhook(acc);
    const n = 2 * PURGE_BATCH + 1_234;
    await history(acc, doomed, n);
    await history(acc, kept, 10);
    await sql`TRUNCATE deletions_seen`.execute(t.db);

    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/webhooks/${doomed}` }), 200);

    expect(await left(doomed)).toEqual({ d: 0, a: 0 });
    expect(await left(kept)).toEqual({ d: 10, a: 10 });
    const { rows } = await sql<{ tbl: string; xid: string; n: number }>`
      SELECT tbl, xid::text, n::int FROM deletions_seen WHERE n > 0`.execute(t.db);
    const of = (table: string) => rows.filter((r) => r.tbl === table);
    expect(of('webhooks')).toHaveLength(1);
    const webhookXid = of('webhooks')[0]!.xid;
    for (const table of ['webhook_deliveries', 'webhook_attempts']) {
      const batches = of(table);
      expect(batches.reduce((sum, b) => sum + b.n, 0)).toBe(n);
      expect(Math.max(...batches.map((b) => b.n))).toBeLessThanOrEqual(PURGE_BATCH);
      // Each batch committed on its own: no transaction holds the whole history.
      expect(new Set(batches.map((b) => b.xid)).size).toBe(batches.length);
      expect(batches.length).toBeGreaterThanOrEqual(3);
      expect(batches.map((b) => b.xid)).not.toContain(webhookXid);
    }
    // Gone for the API at once.
    expectStatus(await acc.call({ method: 'GET', url: `/v1/webhooks/${doomed}` }), 404);
  });

  it('what a purge leaves (a restart in the middle) goes with the webhook.purge job queued by the deletion', async () => {
    const acc = await newAccount(t);
    const doomed = await webhook(acc);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/webhooks/${doomed}` }), 200);
    // Rows the request's purge did not reach.
    await history(acc, doomed, 300);
    const job = () =>
      t.db
        .selectFrom('jobs')
        .select(['kind', 'payload'])
        .where('account_id', '=', acc.accountId)
        .execute();
    expect(await job()).toEqual([{ kind: 'webhook.purge', payload: { v: 1, webhook_id: doomed } }]);
    expect(await runJobs(acc.accountId)).toBe(0);
    t.clock.advance(60_000);
    await runJobs(acc.accountId);
    expect(await left(doomed)).toEqual({ d: 0, a: 0 });
    expect(await job()).toEqual([]);
  });
});
