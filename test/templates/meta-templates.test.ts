import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GraphClient } from '../../src/channels/meta/graph-client.js';
import { WhatsAppTemplates } from '../../src/channels/whatsapp/templates.js';
import type { WhatsAppTemplateApi } from '../../src/templates/provider-templates.js';
import type { TemplatesService } from '../../src/templates/templates.service.js';
import { META_ERRORS, startFakeGraph, type FakeGraph } from '../fake-graph/server.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { eventsOf, expectError, expectStatus } from '../inbox-helpers.js';

let t: TestApp;
let graph: FakeGraph;
let client: GraphClient;
let wabaSeq = 0;
/** The accounts whose whatsapp channel is "connected" to whatsapp_cloud in these tests. */
const connected = new Map<string, WhatsAppTemplateApi>();

beforeAll(async () => {
  t = await startTestApp();
  graph = await startFakeGraph();
  client = new GraphClient({ baseUrl: graph.url, version: 'v23.0', timeoutMs: 2_000 });
  // The app builds TemplatesService before connections exist in this branch; the lead wires the
  // lookup from the account's whatsapp connection. Until then the test gives it one per account.
  const deps = (t.services.templates as unknown as { deps: Record<string, unknown> }).deps;
  deps.whatsappTemplates = (accountId: string) => Promise.resolve(connected.get(accountId) ?? null);
});
afterEach(() => graph.reset());
afterAll(async () => {
  await client.close();
  await graph.stop();
  await t.close();
});

/** A fresh account with its own WhatsApp Business Account on the fake Graph API. */
async function connectedAccount() {
  const acc = await newAccount(t);
  wabaSeq++;
  const phone = {
    id: `1065403522${String(wabaSeq).padStart(5, '0')}`,
    token: `EAAG-token-${acc.accountId}`,
    display_phone_number: '+1 555-010-0001',
    verified_name: 'Acme',
    business_account_id: `1022901293${String(wabaSeq).padStart(5, '0')}`,
  };
  graph.addPhoneNumber(phone);
  connected.set(
    acc.accountId,
    new WhatsAppTemplates({
      graph: client,
      businessAccountId: phone.business_account_id,
      accessToken: phone.token,
    }),
  );
  return { acc, waba: phone.business_account_id, token: phone.token };
}

const TEMPLATES = (waba: string) => ({ resource: `${waba}/message_templates` });
const list = async (acc: TestAccount) =>
  (await acc.call({ method: 'GET', url: '/v1/templates?limit=100' })).json().data as Array<
    Record<string, unknown>
  >;
const service = (): TemplatesService => t.services.templates;

describe('POST /v1/templates on a WhatsApp Cloud connection', () => {
  it("submits the template to Meta and keeps Meta's id; status pending", async () => {
    const { acc, waba, token } = await connectedAccount();
    const res = await acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: {
        name: 'order_ready',
        language: 'en_US',
        category: 'utility',
        body: 'Order {{1}} is ready, {{2}}',
      },
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ name: 'order_ready', language: 'en_US', status: 'pending' });

    const req = graph.last({ method: 'POST', resource: `${waba}/message_templates` })!;
    expect(req.headers.authorization).toBe(`Bearer ${token}`);
    expect(req.body.toString('utf8')).toBe(
      '{"name":"order_ready","language":"en_US","category":"UTILITY","components":[{"type":"BODY","text":"Order {{1}} is ready, {{2}}","example":{"body_text":[["sample 1","sample 2"]]}}]}',
    );
    const metaId = graph.templatesOf(waba)[0]!.id;
    const row = await t.db
      .selectFrom('templates')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .executeTakeFirstOrThrow();
    expect(row.provider_template_id).toBe(metaId);
  });

  it('sends no example for a body without placeholders, and uppercases the category', async () => {
    const { acc, waba } = await connectedAccount();
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'hello', category: 'marketing', body: 'Hello!' },
      }),
      201,
    );
    expect(graph.last(TEMPLATES(waba))!.json).toEqual({
      name: 'hello',
      language: 'en',
      category: 'MARKETING',
      components: [{ type: 'BODY', text: 'Hello!' }],
    });
  });

  it("Meta's refusal is a 422 quoting its code, and nothing is stored", async () => {
    const { acc, waba } = await connectedAccount();
    graph.failNext(TEMPLATES(waba), 1, {
      status: 400,
      error: {
        code: 100,
        error_subcode: 2388024,
        message: 'Invalid parameter',
        error_user_msg: 'There is already en content for this template.',
      },
    });
    const res = await acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: { name: 'dup', body: 'x' },
    });
    const err = expectError(res, 422);
    expect(err.message).toContain('(#100)');
    expect(err.message).toContain('already en content');
    expect(await list(acc)).toEqual([]);
  });

  it('a throttled or failing Meta is a 503 with Retry-After, nothing stored', async () => {
    const { acc, waba } = await connectedAccount();
    graph.failNext(TEMPLATES(waba), 1, {
      ...META_ERRORS.tooManyCalls,
      headers: { 'retry-after': '12' },
    });
    const res = await acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: { name: 'later', body: 'x' },
    });
    expectStatus(res, 503);
    expect(res.json().error.code).toBe('unavailable');
    expect(res.headers['retry-after']).toBe('12');
    expect(await list(acc)).toEqual([]);
  });

  it('a name already used here is a 409 and Meta never hears of it', async () => {
    const { acc, waba } = await connectedAccount();
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'once', body: 'x' },
      }),
      201,
    );
    graph.reset();
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'once', body: 'y' },
      }),
      409,
    );
    expect(graph.find(TEMPLATES(waba))).toHaveLength(0);
  });

  it('the sandbox review endpoint refuses a template submitted to Meta', async () => {
    const { acc } = await connectedAccount();
    const created = (
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'meta_one', body: 'x' },
      })
    ).json();
    const res = await acc.call({
      method: 'POST',
      url: `/v1/sandbox/templates/${created.id}/review`,
      payload: { status: 'approved' },
    });
    expect(expectError(res, 422).message).toMatch(/status comes from Meta/);
    expect(
      (await acc.call({ method: 'GET', url: `/v1/templates/${created.id}` })).json().status,
    ).toBe('pending');
  });

  it('an account without a connection keeps sandbox templates (no Graph call)', async () => {
    const acc = await newAccount(t);
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'local', body: 'x' },
      }),
      201,
    );
    expect(graph.requests).toHaveLength(0);
  });
});

describe('DELETE /v1/templates/{id} on a WhatsApp Cloud connection', () => {
  async function submitted(acc: TestAccount, name: string) {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: { name, language: 'en_US', body: 'Hi {{1}}' },
    });
    expectStatus(res, 201);
    return res.json<{ id: string }>();
  }

  it('deletes the template at Meta by its id and name, then here: the name is free again at both', async () => {
    const { acc, waba, token } = await connectedAccount();
    const tpl = await submitted(acc, 'spring_promo');
    const metaId = graph.templatesOf(waba)[0]!.id;
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 200);
    const req = graph.last({ method: 'DELETE', resource: `${waba}/message_templates` })!;
    expect(req.headers.authorization).toBe(`Bearer ${token}`);
    expect(req.query).toMatchObject({ hsm_id: metaId, name: 'spring_promo' });
    expect(graph.templatesOf(waba)).toEqual([]);
    expect(await list(acc)).toEqual([]);
    // Submitted again under the same name: Meta takes it, and so do we.
    await submitted(acc, 'spring_promo');
    expect(graph.templatesOf(waba)).toHaveLength(1);
  });

  it('one Meta no longer holds (deleted in WhatsApp Manager) is deleted here all the same', async () => {
    const { acc, waba } = await connectedAccount();
    const tpl = await submitted(acc, 'gone_at_meta');
    const metaId = graph.templatesOf(waba)[0]!.id;
    // Deleted at Meta behind our back.
    await connected
      .get(acc.accountId)!
      .remove({ name: 'gone_at_meta', providerTemplateId: metaId });
    expect(graph.templatesOf(waba)).toEqual([]);
    const res = await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` });
    expectStatus(res, 200);
    // Meta said it holds no such template (#100), which is what was asked for.
    expect(graph.find({ method: 'DELETE', resource: `${waba}/message_templates` })).toHaveLength(2);
    expect(await list(acc)).toEqual([]);
  });

  it("Meta's refusal (a token it no longer takes) is a 422 quoting it, and nothing is deleted here; a throttled Meta a 503", async () => {
    const { acc, waba } = await connectedAccount();
    const tpl = await submitted(acc, 'kept_here');
    graph.failNext(
      { method: 'DELETE', resource: `${waba}/message_templates` },
      1,
      META_ERRORS.expiredToken,
    );
    const refused = expectError(
      await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }),
      422,
    );
    expect(refused.message).toContain('(#190)');
    graph.failNext(
      { method: 'DELETE', resource: `${waba}/message_templates` },
      1,
      META_ERRORS.tooManyCalls,
    );
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 503);
    expect((await list(acc)).map((x) => x.name)).toEqual(['kept_here']);
    expect(graph.templatesOf(waba)).toHaveLength(1);
  });

  it('a template of our own (sandbox) is deleted without a Graph call', async () => {
    const acc = await newAccount(t);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/templates',
      payload: { name: 'local_only', body: 'x' },
    });
    expectStatus(res, 201);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${res.json().id}` }), 200);
    expect(graph.find({ method: 'DELETE' })).toEqual([]);
  });
});

describe('POST /v1/templates/sync', () => {
  it('is a 422 without a WhatsApp Cloud connection', async () => {
    const acc = await newAccount(t);
    expectError(await acc.call({ method: 'POST', url: '/v1/templates/sync' }), 422);
  });

  it("imports Meta's templates across pages, mapping statuses and the BODY text", async () => {
    const { acc, waba, token } = await connectedAccount();
    for (let i = 0; i < 150; i++)
      graph.addTemplate({
        business_account_id: waba,
        name: `bulk_${i}`,
        language: 'en',
        body: `Bulk ${i} {{1}}`,
        status: 'APPROVED',
      });
    graph.addTemplate({
      business_account_id: waba,
      name: 'promo',
      language: 'es',
      category: 'MARKETING',
      status: 'REJECTED',
      rejected_reason: 'INCORRECT_CATEGORY',
      components: [
        { type: 'HEADER', format: 'TEXT', text: 'Oferta' },
        { type: 'BODY', text: 'Hola {{1}}' },
        { type: 'FOOTER', text: 'Bye' },
      ],
    });
    graph.addTemplate({
      business_account_id: waba,
      name: 'paused_one',
      language: 'en',
      body: 'P',
      status: 'PAUSED',
    });
    graph.addTemplate({
      business_account_id: waba,
      name: 'no_body',
      language: 'en',
      components: [{ type: 'HEADER', format: 'IMAGE' }],
    });

    const res = await acc.call({ method: 'POST', url: '/v1/templates/sync' });
    expectStatus(res, 200);
    expect(res.json()).toEqual({
      created: 152,
      updated: 0,
      unchanged: 0,
      skipped: [{ name: 'no_body', language: 'en', reason: 'it has no body text' }],
    });
    const pages = graph.find({ method: 'GET', resource: `${waba}/message_templates` });
    expect(pages).toHaveLength(2);
    expect(pages[1]!.query.after).toBeTruthy();
    expect(pages.every((p) => p.token === token)).toBe(true);

    const byName = new Map((await list(acc)).map((x) => [x.name, x]));
    expect(byName.size).toBe(100); // the first page of our own list
    const all = await t.db
      .selectFrom('templates')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .execute();
    const row = (name: string) => all.find((r) => r.name === name)!;
    expect(row('bulk_7')).toMatchObject({
      status: 'approved',
      body: 'Bulk 7 {{1}}',
      language: 'en',
      category: 'utility',
    });
    expect(row('promo')).toMatchObject({
      status: 'rejected',
      body: 'Hola {{1}}',
      language: 'es',
      category: 'marketing',
    });
    expect(row('paused_one').status).toBe('pending');
    // Meta's reason for the rejection is the API's too; its "NONE" is none.
    const read = async (name: string) =>
      (await acc.call({ method: 'GET', url: `/v1/templates/${row(name).id}` })).json();
    expect(await read('promo')).toMatchObject({
      status: 'rejected',
      rejection_reason: 'INCORRECT_CATEGORY',
    });
    expect((await read('bulk_7')).rejection_reason).toBeNull();
    expect(row('promo').provider_template_id).toBe(
      graph.templatesOf(waba).find((x) => x.name === 'promo')!.id,
    );
  });

  it('upserts: a second sync updates what changed, adopts a local template of that name and language, skips another language', async () => {
    const { acc, waba } = await connectedAccount();
    const { id: metaId } = graph.addTemplate({
      business_account_id: waba,
      name: 'welcome',
      language: 'en',
      body: 'Hi {{1}}',
      status: 'PENDING',
    });
    expectStatus(await acc.call({ method: 'POST', url: '/v1/templates/sync' }), 200);

    // Created here before the connection (no Meta id): adopted by name and language.
    connected.delete(acc.accountId);
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'local_first', body: 'Old' },
      }),
      201,
    );
    expectStatus(
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'bilingual', language: 'fr', body: 'Salut' },
      }),
      201,
    );
    connectedAgain(acc, waba);
    graph.addTemplate({
      business_account_id: waba,
      name: 'local_first',
      language: 'en',
      body: 'New',
      status: 'APPROVED',
    });
    graph.addTemplate({
      business_account_id: waba,
      name: 'bilingual',
      language: 'de',
      body: 'Hallo',
      status: 'APPROVED',
    });
    graph.setTemplateStatus(metaId, 'APPROVED');

    const res = await acc.call({ method: 'POST', url: '/v1/templates/sync' });
    expect(res.json()).toEqual({
      created: 0,
      updated: 2,
      unchanged: 0,
      skipped: [
        {
          name: 'bilingual',
          language: 'de',
          reason: 'the name bilingual is already used by a template in fr',
        },
      ],
    });
    const byName = new Map((await list(acc)).map((x) => [x.name, x]));
    expect(byName.get('welcome')!.status).toBe('approved');
    expect(byName.get('local_first')).toMatchObject({ status: 'approved', body: 'New' });
    expect(byName.get('bilingual')).toMatchObject({
      language: 'fr',
      body: 'Salut',
      status: 'pending',
    });

    // Each template the sync changed is a template.updated.
    const updatedEvents = async () =>
      (await eventsOf(t.db, acc.accountId, 'template.updated')).map(
        (e) => (e.data as { name: string; status: string }).name,
      );
    expect((await updatedEvents()).sort()).toEqual(['local_first', 'welcome']);

    const again = await acc.call({ method: 'POST', url: '/v1/templates/sync' });
    expect(again.json()).toMatchObject({ created: 0, updated: 0, unchanged: 2 });
    expect(await updatedEvents()).toHaveLength(2);
  });

  it("Meta's failure during sync is a 503 and nothing is half-imported", async () => {
    const { acc, waba } = await connectedAccount();
    for (let i = 0; i < 120; i++)
      graph.addTemplate({ business_account_id: waba, name: `n_${i}`, language: 'en', body: 'x' });
    graph.failNext(
      (r) => r.resource === `${waba}/message_templates` && r.query.after !== undefined,
      1,
      META_ERRORS.apiService,
    );
    expectStatus(await acc.call({ method: 'POST', url: '/v1/templates/sync' }), 503);
    expect(await list(acc)).toEqual([]);
  });
});

/** Connects the account again to the same business account (after a spell without). */
function connectedAgain(acc: TestAccount, waba: string) {
  connected.set(
    acc.accountId,
    new WhatsAppTemplates({
      graph: client,
      businessAccountId: waba,
      accessToken: `EAAG-token-${acc.accountId}`,
    }),
  );
}

describe('applyProviderStatus (message_template_status_update)', () => {
  it('approved and rejected (with reason) by Meta id; unknown ids change nothing', async () => {
    const { acc, waba } = await connectedAccount();
    const created = (
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'status_me', body: 'x' },
      })
    ).json();
    const metaId = graph.templatesOf(waba)[0]!.id;

    const approved = await service().applyProviderStatus(acc.accountId, {
      providerTemplateId: metaId,
      name: 'status_me',
      language: 'en',
      status: 'approved',
      reason: null,
    });
    expect(approved).toMatchObject({ id: created.id, status: 'approved' });

    await service().applyProviderStatus(acc.accountId, {
      providerTemplateId: metaId,
      name: 'status_me',
      language: 'en',
      status: 'rejected',
      reason: 'INCORRECT_CATEGORY',
    });
    const row = await t.db
      .selectFrom('templates')
      .selectAll()
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'rejected', rejection_reason: 'INCORRECT_CATEGORY' });
    // The API shows Meta's reason, in the single read and in the list.
    expect((await acc.call({ method: 'GET', url: `/v1/templates/${created.id}` })).json()).toEqual({
      ...created,
      status: 'rejected',
      rejection_reason: 'INCORRECT_CATEGORY',
    });
    expect(
      (await acc.call({ method: 'GET', url: '/v1/templates?status=rejected' })).json().data,
    ).toEqual([{ ...created, status: 'rejected', rejection_reason: 'INCORRECT_CATEGORY' }]);
    // Approved again (an appeal won): the reason goes.
    expect(
      await service().applyProviderStatus(acc.accountId, {
        providerTemplateId: metaId,
        name: 'status_me',
        language: 'en',
        status: 'approved',
      }),
    ).toMatchObject({ status: 'approved', rejection_reason: null });

    expect(
      await service().applyProviderStatus(acc.accountId, {
        providerTemplateId: '999',
        name: 'nope',
        language: 'en',
        status: 'approved',
      }),
    ).toBeNull();
  });

  it('emits template.updated with the template in the transaction of each status change, none for a repeat', async () => {
    const { acc, waba } = await connectedAccount();
    const created = (
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'evented', body: 'Hi {{1}}' },
      })
    ).json();
    const metaId = graph.templatesOf(waba)[0]!.id;
    const report = (status: 'approved' | 'rejected', reason: string | null = null) =>
      service().applyProviderStatus(acc.accountId, {
        providerTemplateId: metaId,
        name: 'evented',
        language: 'en',
        status,
        reason,
      });
    expect(await eventsOf(t.db, acc.accountId, 'template.updated')).toEqual([]);
    await report('approved');
    await report('approved');
    await report('rejected', 'INCORRECT_CATEGORY');
    const events = await eventsOf(t.db, acc.accountId, 'template.updated');
    expect(events.map((e) => e.data)).toEqual([
      { ...created, status: 'approved' },
      { ...created, status: 'rejected', rejection_reason: 'INCORRECT_CATEGORY' },
    ]);
  });

  it('falls back to name and language, and never touches another account', async () => {
    const { acc } = await connectedAccount();
    const other = await newAccount(t);
    connected.delete(acc.accountId);
    const mine = (
      await acc.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'shared_name', language: 'en', body: 'x' },
      })
    ).json();
    const theirs = (
      await other.call({
        method: 'POST',
        url: '/v1/templates',
        payload: { name: 'shared_name', language: 'en', body: 'x' },
      })
    ).json();

    expect(
      await service().applyProviderStatus(acc.accountId, {
        providerTemplateId: '4242',
        name: 'shared_name',
        language: 'de',
        status: 'approved',
      }),
    ).toBeNull();
    const updated = await service().applyProviderStatus(acc.accountId, {
      providerTemplateId: '4242',
      name: 'shared_name',
      language: 'en',
      status: 'approved',
    });
    expect(updated).toMatchObject({ id: mine.id, status: 'approved' });
    const row = await t.db
      .selectFrom('templates')
      .selectAll()
      .where('id', '=', mine.id)
      .executeTakeFirstOrThrow();
    expect(row.provider_template_id).toBe('4242');
    expect(
      (await other.call({ method: 'GET', url: `/v1/templates/${theirs.id}` })).json().status,
    ).toBe('pending');
  });
});
