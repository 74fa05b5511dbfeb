import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneEvents } from '../../src/events/retention.js';
import { newId } from '../../src/ids.js';
import { WebhookDispatcher } from '../../src/webhooks/webhook-dispatcher.js';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';
import { testWebhookSecrets } from '../secrets-key.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

it('prunes finished deliveries and attempt logs past the retention period, never pending ones', async () => {
  const acc = await newAccount(t);
  const old = new Date(Date.now() - 8 * 86_400_000);
  const recent = new Date();
  const row = (event_id: string, state: 'delivered' | 'failed' | 'pending', at: Date) => ({
    account_id: acc.accountId,
    webhook_id: 'wh_prune',
    event_id,
    event_type: 'contact.created',
    state,
    next_attempt_at: new Date(Date.now() + 86_400_000),
    created_at: at,
    updated_at: at,
  });
  await t.db
    .insertInto('webhook_deliveries')
    .values([
      row('evt_old_done', 'delivered', old),
      row('evt_old_failed', 'failed', old),
      row('evt_old_pending', 'pending', old),
      row('evt_new_done', 'delivered', recent),
    ])
    .execute();
  const attempt = (at: Date) => ({
    account_id: acc.accountId,
    id: newId('dlv'),
    webhook_id: 'wh_prune',
    event_id: 'evt_x',
    event_type: 'contact.created',
    attempt: 1,
    status_code: 200,
    error: null,
    duration_ms: 3,
    created_at: at,
  });
  await t.db
    .insertInto('webhook_attempts')
    .values([attempt(old), attempt(recent)])
    .execute();

  // A dispatcher prunes when it starts, then every 10 minutes.
  const dispatcher = new WebhookDispatcher({
    db: t.db,
    secrets: testWebhookSecrets(),
    clock: t.clock,
    log: t.app.log,
    allowPrivate: true,
    accountId: acc.accountId,
  });
  dispatcher.start();
  await new Promise((r) => setTimeout(r, 300));
  await dispatcher.stop();

  const left = await t.db
    .selectFrom('webhook_deliveries')
    .select('event_id')
    .where('account_id', '=', acc.accountId)
    .orderBy('event_id')
    .execute();
  expect(left.map((r) => r.event_id)).toEqual(['evt_new_done', 'evt_old_pending']);
  const attempts = await t.db
    .selectFrom('webhook_attempts')
    .select('created_at')
    .where('account_id', '=', acc.accountId)
    .execute();
  expect(attempts).toHaveLength(1);
});

describe('events', () => {
  let priv: TestApp;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    // A database of its own: pruning events deletes every account's old events.
    const db = await createPrivateDatabase();
    drop = db.drop;
    priv = await startTestApp({ databaseUrl: db.url });
  });
  afterAll(async () => {
    await priv?.close();
    await drop?.();
  });

  const DAY = 86_400_000;
  async function addEvents(accountId: string, ids: string[], at: Date): Promise<void> {
    await priv.db
      .insertInto('events')
      .values(
        ids.map((id) => ({
          account_id: accountId,
          id,
          type: 'contact.created',
          data: JSON.stringify({ id }),
          created_at: at,
        })),
      )
      .execute();
  }
  async function eventIds(accountId: string): Promise<string[]> {
    const rows = await priv.db
      .selectFrom('events')
      .select('id')
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute();
    return rows.map((r) => r.id);
  }

  it('prunes events older than 7 days in batches, keeping those a pending delivery still needs', async () => {
    const acc = await newAccount(priv);
    const now = priv.clock.now();
    const old = new Date(now.getTime() - 7 * DAY - 60_000);
    const recent = new Date(now.getTime() - 7 * DAY + 60_000);
    await addEvents(acc.accountId, ['evt_old_1', 'evt_old_2', 'evt_old_3', 'evt_old_4'], old);
    await addEvents(acc.accountId, ['evt_old_pending', 'evt_old_delivered'], old);
    await addEvents(acc.accountId, ['evt_recent'], recent);
    const delivery = (event_id: string, state: 'pending' | 'delivered', at: Date) => ({
      account_id: acc.accountId,
      webhook_id: 'wh_prune_events',
      event_id,
      event_type: 'contact.created',
      state,
      next_attempt_at: new Date(now.getTime() + DAY),
      created_at: at,
      updated_at: at,
    });
    await priv.db
      .insertInto('webhook_deliveries')
      .values([
        delivery('evt_old_pending', 'pending', old),
        // Finished long ago: pruned with its delivery.
        delivery('evt_old_delivered', 'delivered', old),
      ])
      .execute();

    const dispatcher = new WebhookDispatcher({
      db: priv.db,
      secrets: testWebhookSecrets(),
      clock: priv.clock,
      log: priv.app.log,
      allowPrivate: true,
    });
    dispatcher.start();
    await new Promise((r) => setTimeout(r, 300));
    await dispatcher.stop();
    expect(await eventIds(acc.accountId)).toEqual(['evt_old_pending', 'evt_recent']);

    // In batches: a batch size smaller than the backlog still deletes all of it.
    await addEvents(acc.accountId, ['evt_b1', 'evt_b2', 'evt_b3', 'evt_b4', 'evt_b5'], old);
    expect(await pruneEvents(priv.db, new Date(now.getTime() - 7 * DAY), 2)).toBe(5);
    expect(await eventIds(acc.accountId)).toEqual(['evt_old_pending', 'evt_recent']);
  });
});
