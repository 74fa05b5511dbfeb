import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';
import {
  createContact,
  createTemplate,
  eventsOf,
  expectStatus,
  sendText,
} from '../inbox-helpers.js';
import { signedInUser } from '../users/session-helpers.js';
import { slowProvider } from './slow-provider.js';

// `message.created`: every outbound message when stored, written by the statement that queues it
// (QueueRepository.queue), its data the Message as the API answers it. The provider here answers
// after the API has stopped waiting, so the API answers the message as stored (`queued`).

const { provider: slow } = slowProvider(100);

let t: TestApp;
let drop: () => Promise<void>;
beforeAll(async () => {
  // Its own database: no other file's webhook workers claim the deliveries looked at here.
  const db = await createPrivateDatabase();
  drop = db.drop;
  t = await startTestApp({ databaseUrl: db.url, providers: { webchat: slow }, sendWaitMs: 1 });
});
afterAll(async () => {
  // The provider's answers to the last sends are recorded after it has answered.
  await new Promise((r) => setTimeout(r, 300));
  await t.close();
  await drop();
});

/** The raw `data` of the account's `message.created` events, oldest first, as stored. */
async function createdEvents(accountId: string) {
  const { rows } = await sql<{ id: string; data: string; xmin: string }>`
    SELECT id, data::text AS data, xmin::text AS xmin FROM events
    WHERE account_id = ${accountId} AND type = 'message.created' ORDER BY seq`.execute(t.db);
  return rows;
}

/** The response body with `actor` appended: the event's data, byte for byte once parsed. */
function withActor(body: string, actor: unknown): string {
  return `${body.slice(0, -1)},"actor":${JSON.stringify(actor)}}`;
}

async function xminOfMessage(accountId: string, id: string): Promise<string> {
  const { rows } = await sql<{ x: string }>`
    SELECT xmin::text AS x FROM messages WHERE account_id = ${accountId} AND id = ${id}`.execute(
    t.db,
  );
  return rows[0]!.x;
}

describe('message.created', () => {
  it('an API send writes it with the message exactly as answered, actor null for an API key, in the transaction of the message', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const res = await sendText(acc, contact.id, 'webchat', 'Hello "there" \u00e9\u{1f600}\n');
    expectStatus(res, 201);
    expect(res.json().status).toBe('queued');

    const events = await createdEvents(acc.accountId);
    expect(events).toHaveLength(1);
    expect(JSON.stringify(JSON.parse(events[0]!.data))).toBe(withActor(res.body, null));
    expect(JSON.parse(events[0]!.data).created_at).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/,
    );
    expect(events[0]!.xmin).toBe(await xminOfMessage(acc.accountId, res.json().id));
  });

  it('through a session, the data carries the user as author and actor', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const user = await signedInUser(t, acc, { name: 'Ada "Agent"' });
    const res = await user.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: { contact_id: contact.id, channel: 'webchat', type: 'text', content: 'From Ada' },
    });
    expectStatus(res, 201);
    const actor = { type: 'user', id: user.userId, name: 'Ada "Agent"' };
    expect(res.json().author).toEqual(actor);

    const events = await createdEvents(acc.accountId);
    expect(events).toHaveLength(1);
    expect(JSON.stringify(JSON.parse(events[0]!.data))).toBe(withActor(res.body, actor));
  });

  it('a template send carries its rendered text; an image its media_url', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const template = await createTemplate(acc, 'Hi {{1}}, order {{2}} shipped');
    const sent = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: {
        contact_id: contact.id,
        channel: 'webchat',
        type: 'template',
        template_name: template.name,
        template_params: ['Ann', '#42'],
      },
    });
    expectStatus(sent, 201);
    expect(sent.json().content).toBe('Hi Ann, order #42 shipped');

    const events = await createdEvents(acc.accountId);
    expect(events.map((e) => JSON.stringify(JSON.parse(e.data)))).toEqual([
      withActor(sent.body, null),
    ]);
  });

  it('a send the rules refuse writes none', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    // A text on WhatsApp needs the contact's 24-hour window, which was never opened.
    expectStatus(await sendText(acc, contact.id, 'whatsapp'), 422);
    expectStatus(await sendText(acc, 'con_missing', 'webchat'), 404);
    expect(await eventsOf(t.db, acc.accountId, 'message.created')).toEqual([]);
  });

  it('sends queued together in one statement, of two accounts, each write their own in their account', async () => {
    const accounts = [await newAccount(t), await newAccount(t)];
    const contacts = await Promise.all(accounts.map((acc) => createContact(acc)));
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        sendText(accounts[i % 2]!, contacts[i % 2]!.id, 'webchat', `m${i}`),
      ),
    );
    for (const res of responses) expectStatus(res, 201);
    for (const [a, acc] of accounts.entries()) {
      const events = await createdEvents(acc.accountId);
      const expected = responses
        .filter((_, i) => i % 2 === a)
        .map((r) => withActor(r.body, null))
        .sort();
      expect(events.map((e) => JSON.stringify(JSON.parse(e.data))).sort()).toEqual(expected);
    }
  });

  it("is delivered to the account's active webhooks subscribed to it, and to no other", async () => {
    const acc = await newAccount(t);
    const hook = async (events: string[]) => {
      const res = await acc.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: 'https://127.0.0.1:9/hook', events },
      });
      expectStatus(res, 201);
      return res.json().id as string;
    };
    const subscribed = await hook(['message.created', 'message.failed']);
    await hook(['message.received']);
    const disabled = await hook(['message.created']);
    expectStatus(
      await acc.call({
        method: 'PATCH',
        url: `/v1/webhooks/${disabled}`,
        payload: { status: 'disabled' },
      }),
      200,
    );
    const contact = await createContact(acc);
    expectStatus(await sendText(acc, contact.id), 201);

    const [event] = await createdEvents(acc.accountId);
    const deliveries = await t.db
      .selectFrom('webhook_deliveries')
      .select(['webhook_id', 'event_id', 'event_type'])
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(deliveries).toEqual([
      { webhook_id: subscribed, event_id: event!.id, event_type: 'message.created' },
    ]);
  });
});
