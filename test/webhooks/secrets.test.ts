// Webhook signing secrets are stored sealed under SECRETS_KEY, never in clear: not in the
// webhooks table, not in the replay record of POST /v1/webhooks.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SecretBox } from '../../src/connections/secret-box.js';
import { UNREADABLE_SECRET } from '../../src/webhooks/webhook-dispatcher.js';
import { WebhookSecrets } from '../../src/webhooks/webhook-secrets.js';
import { newAccount, startTestApp, type TestAccount } from '../helpers.js';
import { startHttpsServer } from '../https-server.js';
import { createContact, expectError, expectStatus } from '../inbox-helpers.js';
import { TEST_SECRETS_KEY, testWebhookSecrets } from '../secrets-key.js';
import { startWebhookTestApp, type WebhookTestApp } from './webhook-helpers.js';

let t: WebhookTestApp;
beforeAll(async () => {
  t = await startWebhookTestApp();
});
afterAll(() => t.close());

const receivers: Awaited<ReturnType<typeof startHttpsServer>>[] = [];
async function receiver() {
  const r = await startHttpsServer(() => ({ status: 204 }));
  receivers.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

async function createWebhook(acc: TestAccount, url: string, headers: Record<string, string> = {}) {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/webhooks',
    payload: { url, events: ['contact.created'] },
    headers,
  });
  expectStatus(res, 201);
  return res;
}

/** The forms a secret could be found in: as issued, its base64 key, that key's bytes in hex. */
function formsOf(secret: string): string[] {
  const key = secret.slice('whsec_'.length);
  return [secret, key, Buffer.from(key, 'base64').toString('hex')];
}

/** Every column of the rows, as PostgreSQL prints them (bytea in hex). */
async function printed(table: 'webhooks' | 'idempotency_keys', accountId: string) {
  const { rows } = await sql<{ row: string }>`
    SELECT row_to_json(r)::text AS row FROM ${sql.table(table)} r
    WHERE account_id = ${accountId}`.execute(t.db);
  return rows.map((r) => r.row).join('\n');
}

async function drainWith(secrets: WebhookSecrets): Promise<void> {
  const d = t.dispatcher({ secrets });
  try {
    await d.drain();
  } finally {
    await d.stop();
  }
}

describe('webhook signing secrets', () => {
  it('are stored sealed under SECRETS_KEY: the row holds nothing of the secret in clear', async () => {
    const acc = await newAccount(t);
    const created = await createWebhook(acc, 'https://127.0.0.1:1/hook');
    const { id, secret } = created.json<{ id: string; secret: string }>();

    const rows = await printed('webhooks', acc.accountId);
    expect(rows).toContain(id);
    for (const form of formsOf(secret)) expect(rows).not.toContain(form);
    const { secret_box } = await t.db
      .selectFrom('webhooks')
      .select('secret_box')
      .where('account_id', '=', acc.accountId)
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(testWebhookSecrets().open(secret_box)).toBe(secret);
    expect(testWebhookSecrets(randomBytes(32)).open(secret_box)).toBeNull();
  });

  it('sign deliveries with the secret returned at creation, opened once per webhook', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    const { id, secret } = (await createWebhook(acc, rcv.url('/hook'))).json<{
      id: string;
      secret: string;
    }>();
    // A change of its events keeps its secret.
    const patched = await acc.call({
      method: 'PATCH',
      url: `/v1/webhooks/${id}`,
      payload: { events: ['contact.created', 'contact.updated'] },
    });
    expectStatus(patched, 200);
    await createContact(acc);
    await createContact(acc);

    const box = new SecretBox(TEST_SECRETS_KEY);
    const open = vi.spyOn(box, 'open');
    await drainWith(new WebhookSecrets(box));

    expect(rcv.requests).toHaveLength(2);
    for (const req of rcv.requests) {
      expect(
        new StandardWebhook(secret).verify(
          req.body.toString(),
          req.headers as Record<string, string>,
        ),
      ).toMatchObject({ event: 'contact.created' });
    }
    expect(open).toHaveBeenCalledTimes(1);
  });

  it('that cannot be opened with this SECRETS_KEY fail the attempt with a recorded error and send nothing; the retry with the right key delivers', async () => {
    const rcv = await receiver();
    const acc = await newAccount(t);
    const { id, secret } = (await createWebhook(acc, rcv.url('/hook'))).json<{
      id: string;
      secret: string;
    }>();
    await createContact(acc);

    await drainWith(testWebhookSecrets(randomBytes(32)));
    expect(rcv.requests).toHaveLength(0);
    const log = await acc.call({ method: 'GET', url: `/v1/webhooks/${id}/deliveries` });
    expectStatus(log, 200);
    const [attempt] = log.json<{ data: Record<string, unknown>[] }>().data;
    expect(attempt).toMatchObject({
      attempt: 1,
      status_code: null,
      error: UNREADABLE_SECRET,
      next_attempt_at: expect.any(String) as string,
    });

    t.clock.advance(60_000);
    await drainWith(testWebhookSecrets());
    expect(rcv.requests).toHaveLength(1);
    expect(
      new StandardWebhook(secret).verify(
        rcv.requests[0]!.body.toString(),
        rcv.requests[0]!.headers as Record<string, string>,
      ),
    ).toMatchObject({ event: 'contact.created' });
  });

  it('are replayed to a repeated POST /v1/webhooks, and its replay record holds none in clear', async () => {
    const acc = await newAccount(t);
    const headers = { 'idempotency-key': 'register-once' };
    const first = await createWebhook(acc, 'https://127.0.0.1:1/hook', headers);
    const again = await createWebhook(acc, 'https://127.0.0.1:1/hook', headers);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    const list = await acc.call({ method: 'GET', url: '/v1/webhooks' });
    expect(list.json<{ total: number }>().total).toBe(1);

    const { secret } = first.json<{ secret: string }>();
    const records = await printed('idempotency_keys', acc.accountId);
    expect(records).toContain('register-once');
    for (const form of formsOf(secret)) expect(records).not.toContain(form);
  });

  it('without SECRETS_KEY: registering a webhook is a 422 that says so, and nothing is stored', async () => {
    const noKey = await startTestApp({ databaseUrl: t.databaseUrl, config: { secretsKey: null } });
    try {
      const acc = await newAccount(noKey);
      const res = await acc.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: 'https://127.0.0.1:1/hook', events: ['contact.created'] },
      });
      expect(expectError(res, 422).message).toMatch(/^SECRETS_KEY must be set/);
      expect(await printed('webhooks', acc.accountId)).toBe('');
    } finally {
      await noKey.close();
    }
  });
});
