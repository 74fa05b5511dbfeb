import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { expectError, expectStatus, receive } from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

async function contactWithConversation(
  acc: TestAccount,
  fields: { phone?: string; name?: string; email?: string },
): Promise<{ contact: string; conversation: string }> {
  const res = await acc.call({ method: 'POST', url: '/v1/contacts', payload: fields });
  expectStatus(res, 201);
  const conversation = (await receive(acc, res.json().id)).conversation_id as string;
  return { contact: res.json().id, conversation };
}

const search = async (acc: TestAccount, q: string, extra = '') => {
  const res = await acc.call({
    method: 'GET',
    url: `/v1/conversations?q=${encodeURIComponent(q)}${extra}`,
  });
  expectStatus(res, 200);
  return res.json();
};

describe('GET /v1/conversations?q=', () => {
  it("matches the start of any word of the name, the phone's digits, the email or an identity, ignoring case", async () => {
    const acc = await newAccount(t);
    const ada = await contactWithConversation(acc, {
      phone: '+14155550120',
      name: 'Ada Lovelace-Byron',
      email: 'Countess@Analytical.example',
    });
    const grace = await contactWithConversation(acc, {
      phone: '+442071234567',
      name: 'Grace Hopper',
    });
    // A contact known only on Messenger, by its identity.
    const known = await t.db
      .transaction()
      .execute((trx) =>
        t.services.contacts.findOrCreateByIdentity(trx, acc.accountId, 'messenger', 'PSID99887766'),
      );
    const psid = (await receive(acc, known.id, 'messenger')).conversation_id as string;
    const ids = async (q: string) =>
      ((await search(acc, q)).data as { id: string }[]).map((c) => c.id).sort();

    expect(await ids('ada')).toEqual([ada.conversation]);
    expect(await ids('LOVE')).toEqual([ada.conversation]);
    expect(await ids('byron')).toEqual([ada.conversation]); // a word after a hyphen
    expect(await ids('lovelace ada')).toEqual([ada.conversation]); // words in any order
    expect(await ids('Ada Lovelace-Byron')).toEqual([ada.conversation]); // the whole name
    expect(await ids('velace')).toEqual([]); // inside a word: no
    expect(await ids('ada hopper')).toEqual([]);
    expect(await ids('+1 415 555')).toEqual([ada.conversation]);
    expect(await ids('1415555012')).toEqual([ada.conversation]);
    expect(await ids('4420')).toEqual([grace.conversation]);
    expect(await ids('555')).toEqual([]); // the phone from its start only
    expect(await ids('countess@ana')).toEqual([ada.conversation]);
    expect(await ids('analytical')).toEqual([]);
    expect(await ids('psid9988')).toEqual([psid]);
    expect(await ids('%')).toEqual([]);
    expect(await ids('_')).toEqual([]);
    // Its total counts the matches; other filters still apply.
    expect((await search(acc, 'a')).total).toBe(1);
    expect((await search(acc, 'g')).total).toBe(1);
    expect((await search(acc, 'ada', '&status=resolved')).total).toBe(0);
    // Another account's contacts never match, not even by the same name.
    const other = await newAccount(t);
    expect((await search(other, 'ada')).total).toBe(0);
    const otherAda = await contactWithConversation(other, {
      phone: '+14155550121',
      name: 'Ada Lovelace',
    });
    expect(((await search(other, 'ada love')).data as { id: string }[]).map((c) => c.id)).toEqual([
      otherAda.conversation,
    ]);
    expect(await ids('ada love')).toEqual([ada.conversation]);
    // Letters beyond ASCII, in either case.
    const elodie = await contactWithConversation(acc, {
      phone: '+14155550122',
      name: 'Élodie Ørsted',
    });
    expect(await ids('élo')).toEqual([elodie.conversation]);
    expect(await ids('ÉLODIE ør')).toEqual([elodie.conversation]);
  });

  it('a q over 100 characters is a 422', async () => {
    const acc = await newAccount(t);
    expectError(
      await acc.call({ method: 'GET', url: `/v1/conversations?q=${'a'.repeat(101)}` }),
      422,
      'q',
    );
  });
});
