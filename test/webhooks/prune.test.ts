import { afterAll, beforeAll, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import { WebhookDispatcher } from '../../src/webhooks/webhook-dispatcher.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';

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
