import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import {
  createContact,
  createTemplate,
  eventsOf,
  expectError,
  expectStatus,
  freezeClock,
} from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  freezeClock(t.clock);
});
afterAll(() => t.close());

const create = (acc: TestAccount, payload: Record<string, unknown>) =>
  acc.call({ method: 'POST', url: '/v1/templates', payload });
const review = (acc: TestAccount, id: string, status: string) =>
  acc.call({ method: 'POST', url: `/v1/sandbox/templates/${id}/review`, payload: { status } });

describe('POST /v1/templates', () => {
  it('creates a pending template with language en and category utility by default', async () => {
    const acc = await newAccount(t);
    const res = await create(acc, { name: 'order_shipped', body: 'Your order {{1}} has shipped' });
    expectStatus(res, 201);
    expect(res.json()).toEqual({
      id: expect.stringMatching(/^tpl_/),
      name: 'order_shipped',
      language: 'en',
      category: 'utility',
      body: 'Your order {{1}} has shipped',
      status: 'pending',
      rejection_reason: null,
      created_at: t.clock.now().toISOString(),
    });
  });

  it('keeps the language and category given', async () => {
    const acc = await newAccount(t);
    const res = await create(acc, {
      name: 'promo_1',
      language: 'pt_BR',
      category: 'marketing',
      body: 'Oferta!',
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({
      language: 'pt_BR',
      category: 'marketing',
      status: 'pending',
    });
  });

  it('a name outside [a-z0-9_]{1,512} is a 422 naming name', async () => {
    const acc = await newAccount(t);
    for (const name of ['Welcome', 'has space', 'with-dash', '', 'ünïcode', 'a'.repeat(513)]) {
      expectError(await create(acc, { name, body: 'x' }), 422, 'name');
    }
    expectStatus(await create(acc, { name: 'a'.repeat(512), body: 'x' }), 201);
  });

  it('a bad category, language, missing body or unknown field is a 422 naming it', async () => {
    const acc = await newAccount(t);
    expectError(
      await create(acc, { name: 'a', body: 'x', category: 'transactional' }),
      422,
      'category',
    );
    expectError(await create(acc, { name: 'a', body: 'x', language: 'English' }), 422, 'language');
    expectError(await create(acc, { name: 'a' }), 422, 'body');
    expectError(await create(acc, { name: 'a', body: 'x', status: 'approved' }), 422, 'status');
    expect((await acc.call({ method: 'GET', url: '/v1/templates' })).json().total).toBe(0);
  });

  it('a duplicate name in the account is a 409; another account may use it', async () => {
    const acc = await newAccount(t);
    expectStatus(await create(acc, { name: 'welcome', body: 'Hi' }), 201);
    expectError(await create(acc, { name: 'welcome', body: 'Hello again' }), 409);
    const other = await newAccount(t);
    expectStatus(await create(other, { name: 'welcome', body: 'Hi' }), 201);
  });

  it('placeholders must be numbered from {{1}} without gaps: {{1}} {{3}} is a 422 on body', async () => {
    const acc = await newAccount(t);
    expectError(await create(acc, { name: 'gap', body: 'Hi {{1}}, code {{3}}' }), 422, 'body');
    expectError(await create(acc, { name: 'no_one', body: 'Hi {{2}}' }), 422, 'body');
    expectError(await create(acc, { name: 'zero', body: 'Hi {{0}}' }), 422, 'body');
    expectStatus(
      await create(acc, { name: 'repeat', body: '{{2}} and {{1}} and {{1}} again' }),
      201,
    );
  });
});

describe('POST /v1/sandbox/templates/{id}/review', () => {
  it('approves or rejects a template', async () => {
    const acc = await newAccount(t);
    const a = (await create(acc, { name: 'to_approve', body: 'A' })).json();
    const r = (await create(acc, { name: 'to_reject', body: 'R' })).json();
    const approved = await review(acc, a.id, 'approved');
    expectStatus(approved, 200);
    expect(approved.json()).toEqual({ ...a, status: 'approved' });
    const rejected = await review(acc, r.id, 'rejected');
    expectStatus(rejected, 200);
    expect(rejected.json()).toEqual({ ...r, status: 'rejected' });
    expect((await acc.call({ method: 'GET', url: `/v1/templates/${a.id}` })).json().status).toBe(
      'approved',
    );
    expect((await acc.call({ method: 'GET', url: `/v1/templates/${r.id}` })).json().status).toBe(
      'rejected',
    );
    // The sandbox gives no reason for a rejection.
    expect(rejected.json().rejection_reason).toBeNull();
  });

  it("shows a provider's rejection reason, and the sandbox's verdict clears it", async () => {
    const acc = await newAccount(t);
    const tpl = (await create(acc, { name: 'promo', body: 'P' })).json();
    // Meta's verdict, as its review webhook reports it (found by name and language).
    await t.services.templates.applyProviderStatus(acc.accountId, {
      providerTemplateId: null,
      name: 'promo',
      language: 'en',
      status: 'rejected',
      reason: 'INVALID_FORMAT',
    });
    const read = async () =>
      (await acc.call({ method: 'GET', url: `/v1/templates/${tpl.id}` })).json();
    expect(await read()).toEqual({
      ...tpl,
      status: 'rejected',
      rejection_reason: 'INVALID_FORMAT',
    });
    const listed = (await acc.call({ method: 'GET', url: '/v1/templates' })).json().data;
    expect(listed).toEqual([{ ...tpl, status: 'rejected', rejection_reason: 'INVALID_FORMAT' }]);

    const again = await review(acc, tpl.id, 'rejected');
    expectStatus(again, 200);
    expect(again.json()).toEqual({ ...tpl, status: 'rejected', rejection_reason: null });
    const events = await eventsOf(t.db, acc.accountId, 'template.updated');
    expect(
      events.map((e) => (e.data as { rejection_reason: string | null }).rejection_reason),
    ).toEqual(['INVALID_FORMAT', null]);
  });

  it('emits template.updated (with its actor) when the status changes, none when it stays', async () => {
    const acc = await newAccount(t);
    const tpl = (await create(acc, { name: 'watched', body: 'W {{1}}' })).json();
    expectStatus(await review(acc, tpl.id, 'approved'), 200);
    expectStatus(await review(acc, tpl.id, 'approved'), 200);
    expect(await eventsOf(t.db, acc.accountId, 'template.updated')).toEqual([
      { type: 'template.updated', data: { ...tpl, status: 'approved', actor: null } },
    ]);
  });

  it('an unknown template is a 404; a status other than approved/rejected is a 422', async () => {
    const acc = await newAccount(t);
    expectError(await review(acc, 'tpl_00000000000000000000000000', 'approved'), 404);
    const tpl = (await create(acc, { name: 'x', body: 'x' })).json();
    expectError(await review(acc, tpl.id, 'pending'), 422, 'status');
    const other = await newAccount(t);
    expectError(await review(other, tpl.id, 'approved'), 404);
  });
});

describe('list, get and delete', () => {
  it('lists newest first with pages; gets one; 404 for an unknown id', async () => {
    const acc = await newAccount(t);
    const made = [];
    for (const name of ['t_one', 't_two', 't_three']) {
      t.clock.advance(1000);
      made.push((await create(acc, { name, body: name })).json());
    }
    const all = await acc.call({ method: 'GET', url: '/v1/templates' });
    expectStatus(all, 200);
    expect(all.json()).toEqual({ data: [...made].reverse(), total: 3, page: 1 });
    const page2 = await acc.call({ method: 'GET', url: '/v1/templates?limit=2&page=2' });
    expect(page2.json()).toEqual({ data: [made[0]], total: 3, page: 2 });
    const one = await acc.call({ method: 'GET', url: `/v1/templates/${made[1].id}` });
    expect(one.json()).toEqual(made[1]);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/templates/tpl_00000000000000000000000000' }),
      404,
    );
    const other = await newAccount(t);
    expectError(await other.call({ method: 'GET', url: `/v1/templates/${made[1].id}` }), 404);
    expect((await other.call({ method: 'GET', url: '/v1/templates' })).json().total).toBe(0);
  });

  it('status= narrows the list to one status (the inbox lists the approved ones)', async () => {
    const acc = await newAccount(t);
    const approved = await createTemplate(acc, 'Hi {{1}}', 'approved');
    await createTemplate(acc, 'Nope', 'rejected');
    await createTemplate(acc, 'Waiting', null);
    const list = await acc.call({ method: 'GET', url: '/v1/templates?status=approved' });
    expectStatus(list, 200);
    expect(list.json().data.map((x: { id: string }) => x.id)).toEqual([approved.id]);
    expect(list.json().total).toBe(1);
    expect(
      (await acc.call({ method: 'GET', url: '/v1/templates?status=pending' })).json().total,
    ).toBe(1);
    expectError(
      await acc.call({ method: 'GET', url: '/v1/templates?status=maybe' }),
      422,
      'status',
    );
  });

  it('delete answers { success: true }, then the template is gone and its name free again', async () => {
    const acc = await newAccount(t);
    const tpl = (await create(acc, { name: 'seasonal', body: 'Old text' })).json();
    const del = await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` });
    expectStatus(del, 200);
    expect(del.json()).toEqual({ success: true });
    expectError(await acc.call({ method: 'GET', url: `/v1/templates/${tpl.id}` }), 404);
    expectError(await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 404);
    const again = await create(acc, { name: 'seasonal', body: 'New text' });
    expectStatus(again, 201);
    expect(again.json()).toMatchObject({ name: 'seasonal', status: 'pending', body: 'New text' });
    expect(again.json().id).not.toBe(tpl.id);
  });

  it('another account cannot delete the template', async () => {
    const acc = await newAccount(t);
    const tpl = (await create(acc, { name: 'mine', body: 'x' })).json();
    const other = await newAccount(t);
    expectError(await other.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 404);
    expectStatus(await acc.call({ method: 'GET', url: `/v1/templates/${tpl.id}` }), 200);
  });

  it('a message already sent keeps its rendered content after the template is deleted (and its name reused)', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello {{1}}, welcome aboard', 'approved', 'welcome');
    const sent = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: {
        contact_id: contact.id,
        channel: 'whatsapp',
        type: 'template',
        template_name: 'welcome',
        template_params: ['Ann'],
      },
    });
    expectStatus(sent, 201);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 200);
    await createTemplate(acc, 'Completely different {{1}}', 'approved', 'welcome');
    const conv = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${sent.json().conversation_id}`,
    });
    expect(conv.json().messages).toEqual([sent.json()]);
    expect(conv.json().messages[0].content).toBe('Hello Ann, welcome aboard');
  });

  it('a deleted template can no longer be sent (404)', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Bye');
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/templates/${tpl.id}` }), 200);
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: {
        contact_id: contact.id,
        channel: 'whatsapp',
        type: 'template',
        template_name: tpl.name,
      },
    });
    expectError(res, 404);
  });
});
