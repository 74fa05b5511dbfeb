import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { expectError, expectStatus } from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

const create = (acc: TestAccount, payload: Record<string, unknown>) =>
  acc.call({ method: 'POST', url: '/v1/canned-responses', payload });
const list = async (acc: TestAccount, query = '') => {
  const res = await acc.call({ method: 'GET', url: `/v1/canned-responses${query}` });
  expectStatus(res, 200);
  return res.json<{ data: { shortcut: string }[]; total: number; page: number }>();
};

describe('canned responses', () => {
  it('creates, reads, changes and deletes one', async () => {
    const acc = await newAccount(t);
    const res = await create(acc, { shortcut: 'thanks', content: 'Thank you for writing to us!' });
    expectStatus(res, 201);
    const created = res.json();
    expect(created).toEqual({
      id: expect.stringMatching(/^cr_/),
      shortcut: 'thanks',
      content: 'Thank you for writing to us!',
      created_at: expect.stringMatching(ISO),
      updated_at: created.created_at,
    });
    const url = `/v1/canned-responses/${created.id}`;
    expect((await acc.call({ method: 'GET', url })).json()).toEqual(created);

    const changed = await acc.call({ method: 'PATCH', url, payload: { content: 'Thanks!' } });
    expectStatus(changed, 200);
    expect(changed.json()).toMatchObject({
      id: created.id,
      shortcut: 'thanks',
      content: 'Thanks!',
    });
    const renamed = await acc.call({ method: 'PATCH', url, payload: { shortcut: 'ty' } });
    expect(renamed.json()).toMatchObject({ shortcut: 'ty', content: 'Thanks!' });

    const deleted = await acc.call({ method: 'DELETE', url });
    expectStatus(deleted, 200);
    expect(deleted.json()).toEqual({ success: true });
    expectError(await acc.call({ method: 'GET', url }), 404);
    expectError(await acc.call({ method: 'DELETE', url }), 404);
    expectError(await acc.call({ method: 'PATCH', url, payload: { content: 'x' } }), 404);
  });

  it('a shortcut is the account’s once: a taken one is a 409 on create and on change', async () => {
    const acc = await newAccount(t);
    expectStatus(await create(acc, { shortcut: 'hours', content: 'We open at 9.' }), 201);
    const other = (await create(acc, { shortcut: 'address', content: '1 Main St.' })).json();
    expectError(await create(acc, { shortcut: 'hours', content: 'Again' }), 409);
    expectError(
      await acc.call({
        method: 'PATCH',
        url: `/v1/canned-responses/${other.id}`,
        payload: { shortcut: 'hours' },
      }),
      409,
    );
    expect((await list(acc)).data.map((c) => c.shortcut)).toEqual(['address', 'hours']);
    // Another account may use the same shortcut.
    expectStatus(await create(await newAccount(t), { shortcut: 'hours', content: 'Ours' }), 201);
  });

  it('lists by shortcut; q matches the start of a shortcut or any part of the content, any case', async () => {
    const acc = await newAccount(t);
    for (const [shortcut, content] of [
      ['refund', 'Your refund is on its way.'],
      ['shipping', 'Orders ship within 2 days; REFUNDS take 5.'],
      ['hello', 'Hi! How can we help?'],
      ['re-open', 'We reopened your ticket.'],
    ])
      expectStatus(await create(acc, { shortcut, content }), 201);
    expect((await list(acc)).data.map((c) => c.shortcut)).toEqual([
      'hello',
      're-open',
      'refund',
      'shipping',
    ]);
    expect((await list(acc, '?q=re')).data.map((c) => c.shortcut)).toEqual([
      're-open',
      'refund',
      'shipping', // "REFUNDS" in its content
    ]);
    expect((await list(acc, '?q=ship')).data.map((c) => c.shortcut)).toEqual(['shipping']);
    expect((await list(acc, '?q=RE-O')).data.map((c) => c.shortcut)).toEqual(['re-open']);
    expect((await list(acc, '?q=help')).data.map((c) => c.shortcut)).toEqual(['hello']);
    expect((await list(acc, '?q=fund')).data.map((c) => c.shortcut)).toEqual([
      'refund',
      'shipping',
    ]);
    // LIKE's wildcards are plain characters in q.
    expect((await list(acc, '?q=%25')).total).toBe(0);
    expect((await list(acc, '?q=_')).total).toBe(0);
    const paged = await list(acc, '?limit=2&page=2');
    expect(paged).toMatchObject({ total: 4, page: 2 });
    expect(paged.data.map((c) => c.shortcut)).toEqual(['refund', 'shipping']);
  });

  it('refuses a bad shortcut, empty or long content, unknown fields and an empty change with a 422', async () => {
    const acc = await newAccount(t);
    for (const payload of [
      { shortcut: 'Hello', content: 'x' },
      { shortcut: 'with space', content: 'x' },
      { shortcut: '', content: 'x' },
      { shortcut: 'a'.repeat(33), content: 'x' },
      { shortcut: '/hi', content: 'x' },
      { shortcut: 'ok', content: '' },
      { shortcut: 'ok', content: 'x'.repeat(4097) },
      { shortcut: 'ok' },
      { shortcut: 'ok', content: 'x', extra: true },
    ])
      expectError(await create(acc, payload), 422);
    expectStatus(await create(acc, { shortcut: 'a'.repeat(32), content: 'x'.repeat(4096) }), 201);
    const one = (await create(acc, { shortcut: 'one', content: 'x' })).json();
    expectError(
      await acc.call({ method: 'PATCH', url: `/v1/canned-responses/${one.id}`, payload: {} }),
      422,
    );
    expectError(await acc.call({ method: 'GET', url: '/v1/canned-responses?limit=101' }), 422);
  });

  it('is scoped to its account: another account gets 404 and sees none', async () => {
    const acc = await newAccount(t);
    const mine = (await create(acc, { shortcut: 'secret', content: 'ours' })).json();
    const stranger = await newAccount(t);
    const url = `/v1/canned-responses/${mine.id}`;
    expectError(await stranger.call({ method: 'GET', url }), 404);
    expectError(await stranger.call({ method: 'PATCH', url, payload: { content: 'theirs' } }), 404);
    expectError(await stranger.call({ method: 'DELETE', url }), 404);
    expect((await list(stranger)).total).toBe(0);
    expect((await acc.call({ method: 'GET', url })).json().content).toBe('ours');
  });
});
