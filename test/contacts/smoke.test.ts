import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, randomPhone, startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

describe('smoke', () => {
  it('creates and reads a contact', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const created = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone, name: 'Ada' },
    });
    expect(created.statusCode, created.body).toBe(201);
    const got = await acc.call({ method: 'GET', url: `/v1/contacts/${created.json().id}` });
    expect(got.json()).toEqual(created.json());
  });
});
