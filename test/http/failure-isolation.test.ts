import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { createContact } from '../inbox-helpers.js';

// The read caches off, so that every read of a contact goes through the shared lookup.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ readCache: false });
});
afterAll(() => t.close());

describe('failure isolation', () => {
  it("one account's failing lookups never fail another account's concurrent reads and sends", async () => {
    const attacker = await newAccount(t);
    const victim = await newAccount(t);
    const contacts = await Promise.all(Array.from({ length: 10 }, () => createContact(victim)));

    for (let round = 0; round < 5; round++) {
      const victims: Promise<{ statusCode: number; body: string }>[] = [];
      const hostile: Promise<unknown>[] = [];
      for (const [i, c] of contacts.entries()) {
        // Through the API (the guard answers 404) and straight into the shared lookup, where
        // PostgreSQL refuses the NUL and fails the statement the lookups were grouped into.
        hostile.push(attacker.call({ method: 'GET', url: `/v1/contacts/con_%00${i}` }));
        hostile.push(
          t.services.contacts.get({ accountId: attacker.accountId }, `con_\u0000${i}`).then(
            () => 'found',
            (err: unknown) => err,
          ),
        );
        victims.push(victim.call({ method: 'GET', url: `/v1/contacts/${c.id}` }));
        victims.push(
          victim.call({
            method: 'POST',
            url: '/v1/messages/send',
            payload: { contact_id: c.id, channel: 'webchat', type: 'text', content: 'hi' },
          }),
        );
      }
      const answers = await Promise.all(victims);
      for (const res of answers) expect([200, 201], res.body).toContain(res.statusCode);
      const failures = await Promise.all(hostile);
      for (const f of failures) expect(f).not.toBe('found');
    }
  });
});
