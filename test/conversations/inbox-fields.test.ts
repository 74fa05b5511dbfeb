import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import {
  createContact,
  eventsOf,
  expectError,
  expectStatus,
  freezeClock,
  receive,
  sendText,
} from '../inbox-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  freezeClock(t.clock);
});
afterAll(() => t.close());

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DAY = 24 * 60 * 60 * 1000;

const get = async (acc: TestAccount, id: string) => {
  const res = await acc.call({ method: 'GET', url: `/v1/conversations/${id}` });
  expectStatus(res, 200);
  return res.json();
};
const listed = async (acc: TestAccount, id: string) => {
  const res = await acc.call({ method: 'GET', url: '/v1/conversations?status=all&limit=100' });
  expectStatus(res, 200);
  return res.json().data.find((c: { id: string }) => c.id === id);
};
const read = (acc: TestAccount, id: string) =>
  acc.call({ method: 'POST', url: `/v1/conversations/${id}/read` });

describe('what a conversation carries for an inbox', () => {
  it('its contact, its newest message as a preview, unread count and the window, in the list and the read alike', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    t.clock.advance(1000);
    await receive(acc, contact.id, 'whatsapp', 'first');
    t.clock.advance(1000);
    const second = await receive(acc, contact.id, 'whatsapp', '  Where   is\n my order?  ');
    const id = second.conversation_id;
    const conversation = await get(acc, id);
    // The contact as GET /v1/contacts/{id} shows it (its WhatsApp identity derived from the phone).
    const { name, phone, email, identities } = (
      await acc.call({ method: 'GET', url: `/v1/contacts/${contact.id}` })
    ).json();
    expect(identities).toEqual([{ channel: 'whatsapp', id: contact.phone }]);
    expect(conversation).toMatchObject({
      contact: { id: contact.id, name, phone, email, identities },
      last_message: {
        id: second.id,
        direction: 'inbound',
        type: 'text',
        preview: 'Where is my order?',
        status: second.status,
        created_at: expect.stringMatching(ISO),
      },
      unread_count: 2,
      last_read_at: null,
      window_expires_at: new Date(Date.parse(second.created_at) + DAY).toISOString(),
    });
    expect(await listed(acc, id)).toEqual({ ...conversation, messages: [] });

    // A reply is the newest message; the window is the contact's and stays.
    t.clock.advance(1000);
    const reply = await sendText(acc, contact.id, 'whatsapp', 'x'.repeat(300));
    expectStatus(reply, 201);
    const after = await get(acc, id);
    expect(after.last_message).toMatchObject({ id: reply.json().id, direction: 'outbound' });
    expect(after.last_message.preview).toBe(`${'x'.repeat(139)}…`);
    expect(after.unread_count).toBe(2);
    expect(after.window_expires_at).toBe(conversation.window_expires_at);

    // A day after the contact last wrote, the window is closed.
    t.clock.advance(DAY);
    expect((await get(acc, id)).window_expires_at).toBeNull();
  });

  it('POST /read zeroes the unread count with conversation.read, once; a new inbound message is unread again', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    t.clock.advance(1000);
    const id = (await receive(acc, contact.id, 'webchat', 'hello')).conversation_id;
    t.clock.advance(1000);
    const first = await read(acc, id);
    expectStatus(first, 200);
    expect(first.json()).toMatchObject({
      id,
      unread_count: 0,
      last_read_at: t.clock.now().toISOString(),
      window_expires_at: null, // webchat has no window
    });
    t.clock.advance(1000);
    const again = await read(acc, id);
    expect(again.json()).toEqual(first.json());
    expect(await eventsOf(t.db, acc.accountId, 'conversation.read')).toEqual([
      { type: 'conversation.read', data: { ...first.json(), actor: null } },
    ]);
    t.clock.advance(1000);
    await receive(acc, contact.id, 'webchat', 'are you there?');
    expect((await get(acc, id)).unread_count).toBe(1);
    expectError(await read(acc, 'conv_00000000000000000000000000'), 404);
    expectError(await read(await newAccount(t), id), 404);
  });

  it('a message without text previews as its kind; a deleted contact shows as null', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const image = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: {
        channel: 'whatsapp',
        contact_id: contact.id,
        type: 'image',
        media_url: 'https://example.com/p.png',
      },
    });
    expectStatus(image, 201);
    const id = image.json().conversation_id;
    expect((await get(acc, id)).last_message.preview).toBe('[image]');
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/contacts/${contact.id}` }), 200);
    expect((await get(acc, id)).contact).toBeNull();
  });
});
