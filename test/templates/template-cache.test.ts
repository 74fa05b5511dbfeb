import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact, createTemplate, expectStatus } from '../inbox-helpers.js';

// Approved templates are cached per process (every template send reads one). These tests change
// templates through the API and the way another process would (plain SQL on another
// connection), and check that no send is rendered from a template that is no longer approved
// beyond the moment the change feed takes to tell.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const SOON = { timeout: 5_000, interval: 20 };

async function send(acc: TestAccount, contactId: string, name: string) {
  return acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: {
      contact_id: contactId,
      channel: 'whatsapp',
      type: 'template',
      template_name: name,
      template_params: ['Ann'],
    },
  });
}

describe('approved templates, cached', () => {
  it('are cached while the change feed listens: a change no trigger announced is not seen', async () => {
    expect(t.services.caches.template.isEnabled).toBe(true);
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello {{1}}');
    expectStatus(await send(acc, contact.id, tpl.name), 201);
    // With triggers off for the session (as a replica applies changes), nothing is announced.
    await t.db.connection().execute(async (conn) => {
      await sql`SET session_replication_role = replica`.execute(conn);
      await sql`UPDATE templates SET body = 'Changed {{1}}' WHERE id = ${tpl.id}`.execute(conn);
      await sql`RESET session_replication_role`.execute(conn);
    });
    const cached = await send(acc, contact.id, tpl.name);
    expectStatus(cached, 201);
    expect(cached.json().content).toBe('Hello Ann');
  });

  it('a template rejected, then deleted, by another process is refused as soon as announced', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello {{1}}');
    expectStatus(await send(acc, contact.id, tpl.name), 201);
    await t.db
      .updateTable('templates')
      .set({ status: 'rejected' })
      .where('id', '=', tpl.id)
      .execute();
    await vi.waitFor(async () => expectStatus(await send(acc, contact.id, tpl.name), 422), SOON);
    await t.db
      .updateTable('templates')
      .set({ status: 'approved' })
      .where('id', '=', tpl.id)
      .execute();
    // Not approved is never cached: approval is seen at once, announced or not.
    expectStatus(await send(acc, contact.id, tpl.name), 201);
    await t.db.deleteFrom('templates').where('id', '=', tpl.id).execute();
    await vi.waitFor(async () => expectStatus(await send(acc, contact.id, tpl.name), 404), SOON);
  });

  it('a template reviewed again, deleted, or renamed by a new one through the API is seen at once', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello {{1}}', 'approved', 'cached_welcome');
    expectStatus(await send(acc, contact.id, tpl.name), 201);
    const review = (status: string) =>
      acc.call({
        method: 'POST',
        url: `/v1/sandbox/templates/${tpl.id}/review`,
        payload: { status },
      });
    expectStatus(await review('rejected'), 200);
    expectStatus(await send(acc, contact.id, tpl.name), 422);
    expectStatus(await review('approved'), 200);
    expectStatus(await send(acc, contact.id, tpl.name), 201);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 200);
    expectStatus(await send(acc, contact.id, tpl.name), 404);
    await createTemplate(acc, 'Welcome back {{1}}', 'approved', 'cached_welcome');
    const renewed = await send(acc, contact.id, tpl.name);
    expectStatus(renewed, 201);
    expect(renewed.json().content).toBe('Welcome back Ann');
  });

  it('are per account: one account’s template of a name is not another’s', async () => {
    const [a, b] = [await newAccount(t), await newAccount(t)];
    await createTemplate(a, 'From A {{1}}', 'approved', 'shared_name');
    const contactA = await createContact(a);
    const contactB = await createContact(b);
    expectStatus(await send(a, contactA.id, 'shared_name'), 201);
    expectStatus(await send(b, contactB.id, 'shared_name'), 404);
    await createTemplate(b, 'From B {{1}}', 'approved', 'shared_name');
    const fromB = await send(b, contactB.id, 'shared_name');
    expect(fromB.json().content).toBe('From B Ann');
  });
});
