import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';
import {
  createContact,
  createTemplate,
  receive,
  sendJobsOf,
  withMessageRefused,
} from '../inbox-helpers.js';
import { slowProvider } from './slow-provider.js';

// Concurrent API sends share their bookkeeping (queued together, answers recorded together): these tests send
// many at once, with answers that differ per request, and check that each request gets its own.

const { provider: slow, calls } = slowProvider(15);

let t: TestApp;
let drop: () => Promise<void>;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  drop = db.drop;
  t = await startTestApp({ databaseUrl: db.url, providers: { whatsapp: slow, webchat: slow } });
});
afterAll(async () => {
  await t.close();
  await drop();
});

const send = (acc: Awaited<ReturnType<typeof newAccount>>, payload: object, key?: string) =>
  acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload,
    ...(key ? { headers: { 'idempotency-key': key } } : {}),
  });

/** A text send's body. */
const text = (contactId: string, content: string, channel = 'whatsapp') => ({
  contact_id: contactId,
  channel,
  type: 'text',
  content,
});

/** A template send's body. */
const template = (contactId: string, name: string, params: string[]) => ({
  contact_id: contactId,
  channel: 'whatsapp',
  type: 'template',
  template_name: name,
  template_params: params,
});

it('sends grouped together each get their own answer: sent, or the refusal of their own rule with nothing written', async () => {
  const accounts = [await newAccount(t), await newAccount(t)];
  const cases: { acc: (typeof accounts)[number]; payload: object; expect: number | 'sent' }[] = [];
  for (const acc of accounts) {
    const approved = await createTemplate(acc, 'Hello {{1}}');
    const pending = await createTemplate(acc, 'Pending {{1}}', null);
    for (let i = 0; i < 6; i++) {
      const inWindow = await createContact(acc);
      await receive(acc, inWindow.id, 'whatsapp');
      const silent = await createContact(acc);
      cases.push(
        { acc, payload: text(inWindow.id, `t${i}`), expect: 'sent' },
        { acc, payload: template(silent.id, approved.name, [`n${i}`]), expect: 'sent' },
        // Outside the 24-hour window: only a template may go.
        { acc, payload: text(silent.id, 'late'), expect: 422 },
        { acc, payload: template(inWindow.id, pending.name, ['x']), expect: 422 },
        { acc, payload: template(silent.id, approved.name, []), expect: 422 },
        { acc, payload: text(silent.id, `w${i}`, 'webchat'), expect: 'sent' },
      );
    }
  }
  const before = new Map<string, number>();
  for (const acc of accounts) before.set(acc.accountId, await countMessages(acc.accountId));

  const answers = await Promise.all(cases.map((c) => send(c.acc, c.payload)));

  const sentIds = new Set<string>();
  for (const [i, res] of answers.entries()) {
    const c = cases[i]!;
    if (c.expect === 'sent') {
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json();
      expect(body).toMatchObject({ status: 'sent', ...pick(c.payload, ['type', 'content']) });
      sentIds.add(body.id);
    } else {
      expect(res.statusCode, res.body).toBe(c.expect);
      expect(res.json().error.code).toBe('validation_error');
    }
  }
  // The template's text was rendered with each request's own parameters.
  const rendered = calls.filter((m) => m.type === 'template').map((m) => m.content);
  for (let i = 0; i < 6; i++) expect(rendered).toContain(`Hello n${i}`);
  // Exactly the accepted sends were written, each once, and no send job is left behind.
  for (const acc of accounts) {
    const expected = cases.filter((c) => c.acc === acc && c.expect === 'sent').length;
    expect(await countMessages(acc.accountId)).toBe(before.get(acc.accountId)! + expected);
    expect(await sendJobsOf(t.db, acc.accountId)).toEqual([]);
  }
  expect(sentIds.size).toBe(cases.filter((c) => c.expect === 'sent').length);
});

it('a send that fails in the database fails alone: the rest of its group is queued again and sent once', async () => {
  const acc = await newAccount(t);
  const contacts = await Promise.all(Array.from({ length: 12 }, () => createContact(acc)));
  // One message's insert is refused: the transaction of whichever group holds it fails.
  await withMessageRefused(t.db, 'boom', async () => {
    const answers = await Promise.all(
      contacts.map((c, i) =>
        send(
          acc,
          { contact_id: c.id, channel: 'webchat', type: 'text', content: i === 5 ? 'boom' : 'ok' },
          `ledger-${i}`,
        ),
      ),
    );
    for (const [i, res] of answers.entries()) {
      if (i === 5) expect(res.statusCode).toBeGreaterThanOrEqual(500);
      else expect(res.statusCode, res.body).toBe(201);
    }
    const rows = await t.db
      .selectFrom('messages')
      .select(['id', 'content', 'status'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(rows).toHaveLength(11);
    expect(rows.every((r) => r.content === 'ok' && r.status === 'sent')).toBe(true);
    // Every successful request's idempotency record replays its one message.
    for (const [i, res] of answers.entries()) {
      if (i === 5) continue;
      const again = await send(
        acc,
        { contact_id: contacts[i]!.id, channel: 'webchat', type: 'text', content: 'ok' },
        `ledger-${i}`,
      );
      expect(again.statusCode).toBe(201);
      expect(again.json().id).toBe(res.json().id);
    }
  });
});

it('the same Idempotency-Key sent many times at once makes one message', async () => {
  const acc = await newAccount(t);
  const contact = await createContact(acc);
  const payload = { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'once' };
  const answers = await Promise.all(Array.from({ length: 10 }, () => send(acc, payload, 'dup')));
  const created = answers.filter((r) => r.statusCode === 201);
  expect(created.length).toBeGreaterThanOrEqual(1);
  for (const r of answers) expect([201, 409]).toContain(r.statusCode);
  expect(new Set(created.map((r) => r.json().id)).size).toBe(1);
  expect(await countMessages(acc.accountId)).toBe(1);
});

it('text and templates to the same contacts in opposite orders at once: every send succeeds, with no deadlock', async () => {
  const acc = await newAccount(t);
  const template = await createTemplate(acc, 'Hi {{1}}');
  const contacts = [];
  for (let i = 0; i < 10; i++) {
    const c = await createContact(acc);
    await receive(acc, c.id, 'whatsapp');
    contacts.push(c);
  }
  const deadlocks = async () => {
    const r = await sql<{
      n: string;
    }>`SELECT deadlocks::text AS n FROM pg_stat_database WHERE datname = current_database()`.execute(
      t.db,
    );
    return Number(r.rows[0]!.n);
  };
  const before = await deadlocks();
  const sends = [];
  for (let round = 0; round < 6; round++) {
    const order = round % 2 === 0 ? contacts : [...contacts].reverse();
    for (const [i, c] of order.entries()) {
      sends.push(
        send(
          acc,
          (i + round) % 2 === 0
            ? { contact_id: c.id, channel: 'whatsapp', type: 'text', content: `r${round}` }
            : {
                contact_id: c.id,
                channel: 'whatsapp',
                type: 'template',
                template_name: template.name,
                template_params: [`r${round}`],
              },
        ),
      );
    }
  }
  const answers = await Promise.all(sends);
  for (const res of answers) expect(res.statusCode, res.body).toBe(201);
  expect(await countMessages(acc.accountId)).toBe(10 + 60);
  expect(await deadlocks()).toBe(before);
});

async function countMessages(accountId: string): Promise<number> {
  const { n } = await t.db
    .selectFrom('messages')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return Number(n);
}

function pick(o: object, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => keys.includes(k)));
}
