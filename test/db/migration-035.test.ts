import { Migrator, sql } from 'kysely';
import { pino } from 'pino';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createDb, migrate, migrations, type Db } from '../../src/db/database.js';
import { newWebhookSecret } from '../../src/webhooks/signing.js';
import { WebhookDispatcher } from '../../src/webhooks/webhook-dispatcher.js';
import { createPrivateDatabase } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { sealForTests, testWebhookSecrets } from '../secrets-key.js';

/** A database at migration 034, with webhooks whose secrets are stored in clear, as they were. */
async function storeBefore035(db: Db, receiverUrl: string) {
  const before = Object.fromEntries(
    Object.entries(migrations(null)).filter(([name]) => name < '035'),
  );
  const migrated = await new Migrator({
    db,
    provider: { getMigrations: async () => before },
  }).migrateToLatest();
  expect(migrated.error).toBeUndefined();
  const now = new Date();
  const secrets = { wh_a: newWebhookSecret(), wh_b: newWebhookSecret() };
  for (const [id, secret] of Object.entries(secrets)) {
    await sql`
      INSERT INTO webhooks (account_id, id, url, events, secret, status, created_at, updated_at)
      VALUES (${id === 'wh_a' ? 'acc_a' : 'acc_b'}, ${id}, ${receiverUrl}, '{contact.created}',
              ${secret}, 'active', ${now}, ${now})`.execute(db);
  }
  // An event still to be delivered to wh_a: after the migration it is signed with the same secret.
  await sql`
    INSERT INTO events (account_id, id, type, data, created_at)
    VALUES ('acc_a', 'evt_old', 'contact.created', '{"id":"con_1"}', ${now})`.execute(db);
  await sql`
    INSERT INTO webhook_deliveries (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at, updated_at)
    VALUES ('acc_a', 'wh_a', 'evt_old', 'contact.created', 'pending', ${now}, ${now}, ${now})`.execute(
    db,
  );
  return secrets;
}

const columnsOfWebhooks = async (db: Db) =>
  (
    await sql<{ column_name: string }>`
      SELECT column_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'webhooks'`.execute(db)
  ).rows.map((r) => r.column_name);

it('migration 035 seals the webhook secrets stored in clear under SECRETS_KEY, drops the clear column, and deliveries still verify with the original secrets', async () => {
  const receiver = await startHttpsServer(() => ({ status: 204 }));
  const database = await createPrivateDatabase({ migrated: false });
  const db = createDb(database.url, { max: 2 });
  try {
    const secrets = await storeBefore035(db, receiver.url('/hook'));

    await migrate(db, sealForTests);

    expect(await columnsOfWebhooks(db)).not.toContain('secret');
    const rows = await db
      .selectFrom('webhooks')
      .select(['id', 'secret_box'])
      .orderBy('id')
      .execute();
    const opener = testWebhookSecrets();
    expect(rows.map((r) => [r.id, opener.open(r.secret_box)])).toEqual([
      ['wh_a', secrets.wh_a],
      ['wh_b', secrets.wh_b],
    ]);
    // Nothing of a secret is left readable in a row.
    const raw = await sql<{
      row: string;
    }>`SELECT row_to_json(w)::text AS row FROM webhooks w`.execute(db);
    for (const secret of Object.values(secrets)) {
      const bytes = Buffer.from(secret.slice('whsec_'.length), 'base64');
      for (const { row } of raw.rows) {
        expect(row).not.toContain(secret.slice('whsec_'.length));
        expect(row).not.toContain(bytes.toString('hex'));
      }
    }

    const dispatcher = new WebhookDispatcher({
      db,
      secrets: testWebhookSecrets(),
      clock: systemClock,
      log: pino({ level: 'silent' }),
      allowPrivate: true,
    });
    expect(await dispatcher.drain()).toBe(1);
    await dispatcher.stop();
    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    expect(
      new StandardWebhook(secrets.wh_a).verify(
        req.body.toString(),
        req.headers as Record<string, string>,
      ),
    ).toMatchObject({ id: 'evt_old', event: 'contact.created' });
  } finally {
    await db.destroy();
    await database.drop();
    await receiver.close();
  }
});

it('migration 035 without SECRETS_KEY refuses a store holding webhooks, and changes nothing', async () => {
  const database = await createPrivateDatabase({ migrated: false });
  const db = createDb(database.url, { max: 2 });
  try {
    const secrets = await storeBefore035(db, 'https://example.com/hook');

    await expect(migrate(db, null)).rejects.toThrow(
      /migration 035_webhook_secret_boxes failed: 2 webhook signing secret\(s\) are stored in clear .*SECRETS_KEY is needed/,
    );

    expect(await columnsOfWebhooks(db)).toContain('secret');
    const kept = await sql<{ id: string; secret: string }>`
      SELECT id, secret FROM webhooks ORDER BY id`.execute(db);
    expect(kept.rows).toEqual([
      { id: 'wh_a', secret: secrets.wh_a },
      { id: 'wh_b', secret: secrets.wh_b },
    ]);
    const applied = await sql<{ name: string }>`
      SELECT name FROM kysely_migration WHERE name >= '035'`.execute(db);
    expect(applied.rows).toEqual([]);

    // With the key, the same store migrates.
    await migrate(db, sealForTests);
    expect(await columnsOfWebhooks(db)).not.toContain('secret');
  } finally {
    await db.destroy();
    await database.drop();
  }
});

it('migration 035 without SECRETS_KEY on a store without webhooks applies', async () => {
  const database = await createPrivateDatabase({ migrated: false });
  const db = createDb(database.url, { max: 2 });
  try {
    await migrate(db, null);
    expect(await columnsOfWebhooks(db)).toContain('secret_box');
    expect(await columnsOfWebhooks(db)).not.toContain('secret');
  } finally {
    await db.destroy();
    await database.drop();
  }
});
