import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';

let t: TestApp;
let acc: TestAccount;
beforeAll(async () => {
  t = await startTestApp();
  acc = await newAccount(t);
});
afterAll(() => t.close());

type Details = { field: string; issue: string }[];
const fields = (details: Details) => details.map((d) => d.field).sort();

describe('a request with several bad fields', () => {
  it('POST /v1/contacts reports a bad phone and a bad email together', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: '+1234', email: 'not-an-email' },
    });
    expect(res.statusCode, res.body).toBe(422);
    const error = res.json().error as { message: string; details: Details };
    expect(fields(error.details)).toEqual(['email', 'phone']);
    expect(error.details.find((d) => d.field === 'phone')!.issue).toMatch(/E\.164/);
    expect(error.message).toContain('phone');
    expect(error.message).toContain('email');
  });

  it('PUT /v1/contacts/{id} reports a bad phone and a bad email together', async () => {
    const created = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone() },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const res = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${id}`,
      payload: { phone: '12345', email: 'x@', name: '' },
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(fields(res.json().error.details)).toEqual(['email', 'name', 'phone']);
  });

  it('gives one entry per field, not one per broken rule, and names every unknown field', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      // The phone breaks maxLength, the E.164 format and nothing else of note: one entry.
      payload: { phone: 'x'.repeat(40), zz: 1, yy: 2 },
    });
    expect(res.statusCode, res.body).toBe(422);
    const details = res.json().error.details as Details;
    expect(fields(details)).toEqual(['phone', 'yy', 'zz']);
  });

  it('reports every bad query parameter at once', async () => {
    const res = await acc.call({ method: 'GET', url: '/v1/contacts?limit=0&page=0&bogus=1' });
    expect(res.statusCode, res.body).toBe(422);
    const details = res.json().error.details as Details;
    expect(fields(details)).toEqual(['bogus', 'limit', 'page']);
  });

  it('still accepts a valid contact', async () => {
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: randomPhone(), email: 'ok@example.com' },
    });
    expect(res.statusCode, res.body).toBe(201);
  });
});
