/**
 * Messenger and Instagram end to end (issue 12): the whole app, its channels connected by the
 * API to Pages at the fake Graph API, webhooks signed and posted over HTTP as Meta posts them
 * (shapes from Meta's published examples, see ../fake-graph/page-webhooks.ts), replies read
 * byte for byte at the fake.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestAccount } from '../helpers.js';
import { newAccount } from '../helpers.js';
import { createTemplate } from '../inbox-helpers.js';
import { fromPerson, mid, pageEvent, pageWebhook, scopedId } from '../fake-graph/page-webhooks.js';
import { inboundWebhook, postSignedWebhook, waMessage, wamid } from '../fake-graph/webhooks.js';
import {
  business,
  connectedAccount,
  createContact,
  deliver,
  drain,
  send,
  events,
  messageRow,
  startE2E,
  type E2E,
} from './whatsapp-e2e-helpers.js';
import {
  connectPageByApi,
  conversationsOf,
  deliverAndDrain,
  recipientOf,
  sendApiBody,
  type PageConnected,
} from './pages-e2e-helpers.js';

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

const DAY_MS = 24 * 60 * 60 * 1000;

function sendOn(
  c: PageConnected,
  payload: Record<string, unknown>,
): ReturnType<TestAccount['call']> {
  return c.acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { channel: c.channel, ...payload },
  });
}

/** The Send API requests the fake received for this page, as the bytes sent. */
function sentBodies(c: PageConnected): string[] {
  return e.graph.find(c.sendMatcher).map((r) => r.body.toString('utf8'));
}

async function getContact(acc: TestAccount, id: string) {
  const res = await acc.call({ method: 'GET', url: `/v1/contacts/${id}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

describe.each([
  {
    channel: 'messenger' as const,
    profile: { first_name: 'Ada', last_name: 'Lovelace' },
    fields: 'first_name,last_name',
  },
  {
    channel: 'instagram' as const,
    profile: { name: 'Ada Lovelace', username: 'ada.l' },
    fields: 'name,username',
  },
])('$channel through the real app', ({ channel, profile, fields }) => {
  let c: PageConnected;
  beforeAll(async () => {
    c = await connectPageByApi(e, await newAccount(e.t), channel);
  });
  const object = channel === 'messenger' ? 'page' : 'instagram';
  const hook = (...events: Record<string, unknown>[]) => pageWebhook(object, c.entryId, ...events);
  const person = () => {
    const id = scopedId();
    e.graph.addProfile({ id, ...profile });
    return id;
  };
  /** The person writes (a signed webhook, processed); answers the contact the message went to. */
  const writes = async (sender: string, text = 'hello?') => {
    const id = mid();
    await deliverAndDrain(e, c, hook(fromPerson(sender, c.entryId, pageEvent.text(text, id))));
    return recipientOf(e, c.acc.accountId, id);
  };

  it('answers the handshake with the verify token the PUT returned; a bad signature is a 401 and nothing is stored', async () => {
    const ok = await e.t.app.inject({
      method: 'GET',
      url: `/channels/${c.connection.id}/webhook`,
      query: {
        'hub.mode': 'subscribe',
        'hub.verify_token': c.connection.verify_token,
        'hub.challenge': '1158201444',
      },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toBe('1158201444');

    const payload = hook(fromPerson(person(), c.entryId, pageEvent.text('hi')));
    for (const [secret, signature] of [
      ['not the app secret', undefined],
      [c.appSecret, 'sha256=00'],
      [c.appSecret, null],
    ] as const) {
      const res = await postSignedWebhook(c.webhookUrl, payload, secret, { signature });
      expect(res.status).toBe(401);
    }
    const stored = await e.t.db
      .selectFrom('inbound_webhooks')
      .select('id')
      .where('account_id', '=', c.acc.accountId)
      .execute();
    expect(stored).toEqual([]);
  });

  it('a new sender: a contact with no phone and their id as identity, named from one profile lookup, and message.received', async () => {
    const sender = person();
    const first = await writes(sender, 'is the blue one in stock?');
    expect(first.channel).toBe(channel);
    const contact = await getContact(c.acc, first.contact_id);
    expect(contact).toMatchObject({
      id: first.contact_id,
      phone: null,
      name: 'Ada Lovelace',
      identities: [{ channel, id: sender }],
    });
    const lookups = e.graph.find({ method: 'GET', resource: sender });
    expect(lookups).toHaveLength(1);
    expect(lookups[0]!.query).toEqual({ fields });
    expect(lookups[0]!.token).toBe(c.pageToken);

    const received = (await events(e, c.acc.accountId, 'message.received')).filter(
      (ev) => (ev.data as { id: string }).id === first.id,
    );
    expect(received).toHaveLength(1);
    expect(received[0]!.data).toMatchObject({
      direction: 'inbound',
      type: 'text',
      content: 'is the blue one in stock?',
    });
    const created = (await events(e, c.acc.accountId, 'contact.created')).filter(
      (ev) => (ev.data as { id: string }).id === first.contact_id,
    );
    expect(created).toHaveLength(1);
    expect(created[0]!.data).toMatchObject({ phone: null, identities: [{ channel, id: sender }] });

    // Later messages go to the same contact, with no new lookup.
    const second = await writes(sender, 'and in red?');
    expect(second.contact_id).toBe(first.contact_id);
    expect(e.graph.find({ method: 'GET', resource: sender })).toHaveLength(1);
  });

  it('the business replies with text and an image: the exact Send API bytes, to the sender’s id, with the page token', async () => {
    const sender = person();
    const { contact_id } = await writes(sender);
    const text = await sendOn(c, { contact_id, type: 'text', content: 'Yes, size M is left' });
    expect(text.statusCode, text.body).toBe(201);
    expect(text.json()).toMatchObject({ type: 'text', status: 'sent', direction: 'outbound' });
    const url = e.media.url('/files/photo.png');
    const image = await sendOn(c, { contact_id, type: 'image', media_url: url });
    expect(image.statusCode, image.body).toBe(201);
    expect(image.json()).toMatchObject({ type: 'image', status: 'sent', media_url: url });

    expect(sentBodies(c)).toEqual([
      sendApiBody(sender, { text: 'Yes, size M is left' }),
      sendApiBody(sender, { attachment: { type: 'image', payload: { url } } }),
    ]);
    for (const r of e.graph.find(c.sendMatcher)) {
      expect(r.path).toBe(`/v23.0/${c.pageId}/messages`);
      expect(r.headers.authorization).toBe(`Bearer ${c.pageToken}`);
    }
    // Meta's message_id is the provider id of each.
    const rows = await Promise.all(
      [text, image].map((r) => messageRow(e, c.acc.accountId, r.json().id)),
    );
    for (const row of rows) expect(row.provider_message_id).toMatch(/^m_/);
    const { conversation_id } = rows[0]!;
    expect(rows[1]!.conversation_id).toBe(conversation_id);
    const conversation = (await conversationsOf(e, c.acc.accountId)).find(
      (x) => x.id === conversation_id,
    );
    expect(conversation).toMatchObject({ contact_id, channel });
  });

  it('a captioned image is two Send API messages; a delivery or a read naming the caption’s id applies to the image', async () => {
    const sender = person();
    const { contact_id } = await writes(sender);
    const url = e.media.url('/files/photo.png');
    const res = await sendOn(c, { contact_id, type: 'image', media_url: url, content: 'Size M' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ status: 'sent', content: 'Size M' });
    expect(sentBodies(c)).toEqual([
      sendApiBody(sender, { attachment: { type: 'image', payload: { url } } }),
      sendApiBody(sender, { text: 'Size M' }),
    ]);
    const row = await messageRow(e, c.acc.accountId, res.json().id);
    const aliases = await e.t.db
      .selectFrom('provider_id_aliases')
      .select(['alias', 'provider_message_id'])
      .where('account_id', '=', c.acc.accountId)
      .execute();
    expect(aliases).toEqual([
      { alias: expect.stringMatching(/^m_/), provider_message_id: row.provider_message_id },
    ]);
    const caption = aliases[0]!.alias;
    expect(caption).not.toBe(row.provider_message_id);

    const at = e.t.clock.now().getTime();
    await deliverAndDrain(
      e,
      c,
      hook(fromPerson(sender, c.entryId, pageEvent.delivery([caption], at))),
    );
    expect((await messageRow(e, c.acc.accountId, row.id)).status).toBe('delivered');
    // Instagram's read names the newest message it saw: the caption.
    await deliverAndDrain(e, c, hook(fromPerson(sender, c.entryId, pageEvent.readMid(caption))));
    expect((await messageRow(e, c.acc.accountId, row.id)).status).toBe('read');
    const unprocessed = await e.t.db
      .selectFrom('inbound_webhooks')
      .select('id')
      .where('account_id', '=', c.acc.accountId)
      .where('processed_at', 'is', null)
      .execute();
    expect(unprocessed).toEqual([]);
  });

  it(
    channel === 'messenger'
      ? 'a delivery by mids marks the message delivered, a read watermark marks it read, each once'
      : 'a delivery marks the message delivered, a read by mid marks it (and earlier ones) read, each once',
    async () => {
      const sender = person();
      const { contact_id } = await writes(sender);
      const sent = [];
      for (const content of ['one', 'two']) {
        const res = await sendOn(c, { contact_id, type: 'text', content });
        expect(res.json()).toMatchObject({ status: 'sent' });
        sent.push(await messageRow(e, c.acc.accountId, res.json().id));
      }
      const [one, two] = sent as [(typeof sent)[0], (typeof sent)[0]];
      const delivery = hook(
        fromPerson(
          sender,
          c.entryId,
          pageEvent.delivery([one.provider_message_id!], e.t.clock.now().getTime()),
        ),
      );
      await deliverAndDrain(e, c, delivery);
      await deliverAndDrain(e, c, delivery); // Meta's retry of the same delivery
      expect((await messageRow(e, c.acc.accountId, one.id)).status).toBe('delivered');
      expect((await messageRow(e, c.acc.accountId, two.id)).status).toBe('sent');

      const read = hook(
        fromPerson(
          sender,
          c.entryId,
          channel === 'messenger'
            ? pageEvent.readWatermark(e.t.clock.now().getTime())
            : pageEvent.readMid(two.provider_message_id!),
        ),
      );
      await deliverAndDrain(e, c, read);
      await deliverAndDrain(e, c, read);
      expect((await messageRow(e, c.acc.accountId, one.id)).status).toBe('read');
      expect((await messageRow(e, c.acc.accountId, two.id)).status).toBe('read');

      const of = async (type: 'message.delivered' | 'message.read', id: string) =>
        (await events(e, c.acc.accountId, type)).filter(
          (ev) => (ev.data as { id: string }).id === id,
        ).length;
      expect(await of('message.delivered', one.id)).toBe(1);
      expect(await of('message.read', one.id)).toBe(1);
      expect(await of('message.read', two.id)).toBe(1);
    },
  );

  it('the window opens when Meta says the person wrote: stamped 23 h 59 min ago and processed now, a text 2 minutes later is the 422', async () => {
    const sender = person();
    const [late, fresh] = [mid(), mid()];
    const stamped = e.t.clock.now().getTime() - DAY_MS + 60_000;
    await deliverAndDrain(
      e,
      c,
      hook(fromPerson(sender, c.entryId, pageEvent.text('sent yesterday', late), stamped)),
    );
    const { contact_id } = await recipientOf(e, c.acc.accountId, late);
    e.t.clock.advance(2 * 60_000);
    const outside = await sendOn(c, { contact_id, type: 'text', content: 'too late?' });
    expect(outside.statusCode, outside.body).toBe(422);
    expect(outside.json().error.message).toContain(
      `outside the 24-hour customer service window on ${channel}`,
    );
    expect(sentBodies(c)).toEqual([]);

    // A timestamp ahead of our clock opens the window no later than now; an older message
    // processed after a newer one leaves the newer one's window.
    const ahead = e.t.clock.now().getTime() + DAY_MS;
    await deliverAndDrain(
      e,
      c,
      hook(fromPerson(sender, c.entryId, pageEvent.text('from the future', fresh), ahead)),
    );
    await deliverAndDrain(
      e,
      c,
      hook(fromPerson(sender, c.entryId, pageEvent.text('older', mid()), stamped)),
    );
    const conversation = await e.t.db
      .selectFrom('conversations')
      .select('last_inbound_at')
      .where('account_id', '=', c.acc.accountId)
      .where('contact_id', '=', contact_id)
      .executeTakeFirstOrThrow();
    expect(conversation.last_inbound_at!.getTime()).toBeLessThanOrEqual(e.t.clock.now().getTime());
    expect(conversation.last_inbound_at!.getTime()).toBeGreaterThan(stamped + 60_000);
    const inside = await sendOn(c, { contact_id, type: 'text', content: 'here now' });
    expect(inside.statusCode, inside.body).toBe(201);
  });

  it('a template follows the 24-hour window: a 422 that says so outside it, the rendered text inside it', async () => {
    const template = await createTemplate(c.acc, 'Hi {{1}}, order {{2}} is ready for pickup');
    const sender = person();
    const { contact_id } = await writes(sender);
    e.t.clock.advance(DAY_MS + 1_000);
    const payload = {
      contact_id,
      type: 'template',
      template_name: template.name,
      template_params: ['Ada', 'A-1043'],
    };
    const outside = await sendOn(c, payload);
    expect(outside.statusCode, outside.body).toBe(422);
    expect(outside.json().error.message).toContain(
      `outside the 24-hour customer service window on ${channel}`,
    );
    expect(outside.json().error.message).toContain('templates included');
    expect(outside.json().error.details).toEqual([
      { field: 'contact_id', issue: 'has not written in the last 24 hours' },
    ]);
    const text = await sendOn(c, { contact_id, type: 'text', content: 'still there?' });
    expect(text.statusCode).toBe(422);
    expect(sentBodies(c)).toEqual([]);
    expect(
      (
        await e.t.db
          .selectFrom('messages')
          .select('id')
          .where('account_id', '=', c.acc.accountId)
          .where('direction', '=', 'outbound')
          .where('content', '=', 'still there?')
          .execute()
      ).length,
    ).toBe(0);

    await writes(sender, 'back again');
    const inside = await sendOn(c, payload);
    expect(inside.statusCode, inside.body).toBe(201);
    expect(inside.json()).toMatchObject({ type: 'template', status: 'sent' });
    expect(sentBodies(c)).toEqual([
      sendApiBody(sender, { text: 'Hi Ada, order A-1043 is ready for pickup' }),
    ]);
  });

  it(`sending on ${channel} to a contact with no ${channel} identity is a 422 that says why`, async () => {
    const contact = await createContact(c.acc);
    const res = await sendOn(c, { contact_id: contact.id, type: 'text', content: 'hello' });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error.message).toBe(
      `contact ${contact.id} has no ${channel} identity: on ${channel} a contact must write first`,
    );
    expect(sentBodies(c)).toEqual([]);
  });

  it('Meta’s duplicates take effect once: the same webhook twice, and the mid again in another', async () => {
    const sender = person();
    const id = mid();
    const payload = hook(fromPerson(sender, c.entryId, pageEvent.text('once', id)));
    await deliverAndDrain(e, c, payload);
    await deliverAndDrain(e, c, payload);
    await deliverAndDrain(
      e,
      c,
      hook(
        fromPerson(sender, c.entryId, pageEvent.text('once', id)),
        fromPerson(sender, c.entryId, pageEvent.text('twice')),
      ),
    );
    const { contact_id } = await recipientOf(e, c.acc.accountId, id);
    const rows = await e.t.db
      .selectFrom('messages')
      .innerJoin('conversations', (j) =>
        j
          .onRef('conversations.id', '=', 'messages.conversation_id')
          .onRef('conversations.account_id', '=', 'messages.account_id'),
      )
      .select(['messages.content', 'messages.provider_message_id'])
      .where('messages.account_id', '=', c.acc.accountId)
      .where('conversations.contact_id', '=', contact_id)
      .orderBy('messages.created_at')
      .execute();
    expect(rows.map((r) => r.content)).toEqual(['once', 'twice']);
    const received = (await events(e, c.acc.accountId, 'message.received')).filter(
      (ev) => (ev.data as { content: string }).content === 'once',
    );
    expect(received).toHaveLength(1);
    const conversations = (await conversationsOf(e, c.acc.accountId)).filter(
      (x) => x.contact_id === contact_id,
    );
    expect(conversations).toHaveLength(1);
    expect(e.graph.find({ method: 'GET', resource: sender })).toHaveLength(1);
    await drain(e, c.acc.accountId);
  });
});

describe('whatsapp through the real app: the window', () => {
  it('opens when Meta says the person wrote: stamped 23 h 59 min ago and processed now, a text 2 minutes later is the 422', async () => {
    const c = await connectedAccount(e);
    const waId = `1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`;
    const id = wamid();
    const stamped = Math.floor((e.t.clock.now().getTime() - DAY_MS + 60_000) / 1000);
    await deliver(
      c,
      inboundWebhook(
        business(c),
        { waId, name: 'Late' },
        { ...waMessage.text(waId, 'sent yesterday', id), timestamp: String(stamped) },
      ),
    );
    await drain(e, c.acc.accountId);
    const row = await e.t.db
      .selectFrom('messages')
      .innerJoin('conversations', (j) =>
        j
          .onRef('conversations.id', '=', 'messages.conversation_id')
          .onRef('conversations.account_id', '=', 'messages.account_id'),
      )
      .select('conversations.contact_id')
      .where('messages.account_id', '=', c.acc.accountId)
      .where('messages.provider_message_id', '=', id)
      .executeTakeFirstOrThrow();
    e.t.clock.advance(2 * 60_000);
    const res = await send(c, { contact_id: row.contact_id, type: 'text', content: 'too late?' });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().error.message).toContain('outside the 24-hour customer service window');
  });
});
