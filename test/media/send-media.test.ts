import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelProvider, OutboundMessage } from '../../src/channels/channel.js';
import { SandboxProvider } from '../../src/channels/sandbox/sandbox.provider.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact, expectError, receive } from '../inbox-helpers.js';
import { connectWebchat, ORIGIN, standInForIdentities } from '../webchat/webchat-helpers.js';
import { ACCEPTED, fileUpload } from './sample-files.js';

const PUBLIC_URL = 'https://switchboard.send-media.example';

/** The sandbox as it is, keeping what it was given to send. */
class RecordingSandbox implements ChannelProvider {
  readonly name = 'sandbox';
  readonly templatesBypassWindow = true;
  readonly reachesAnyContact = true;
  readonly sent: OutboundMessage[] = [];
  private readonly sandbox = new SandboxProvider({
    autoAdvance: false,
    deliveredAfterMs: 0,
    readAfterMs: 0,
  });
  send(message: OutboundMessage) {
    this.sent.push(message);
    return this.sandbox.send(message);
  }
}

const sandbox = new RecordingSandbox();
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    config: { publicUrl: PUBLIC_URL, secretsKey: randomBytes(32) },
    providers: { whatsapp: sandbox },
  });
  standInForIdentities(t.services);
});
afterAll(() => t.close());

async function uploaded(acc: TestAccount, file: Buffer, name: string): Promise<string> {
  const res = await acc.call({ method: 'POST', url: '/v1/media', ...fileUpload(file, name) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}
function send(acc: TestAccount, payload: Record<string, unknown>) {
  return acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { channel: 'whatsapp', ...payload },
  });
}
async function contactInWindow(acc: TestAccount) {
  const contact = await createContact(acc);
  await receive(acc, contact.id);
  return contact;
}
const sentFor = (messageId: string) => sandbox.sent.find((m) => m.messageId === messageId)!;

describe('POST /v1/messages/send with media_id', () => {
  it('sends an uploaded image: the message keeps its /v1/media URL, the provider gets a signed link', async () => {
    const acc = await newAccount(t);
    const contact = await contactInWindow(acc);
    const id = await uploaded(acc, ACCEPTED.png.bytes, 'photo.png');
    const res = await send(acc, {
      contact_id: contact.id,
      type: 'image',
      media_id: id,
      content: 'Your receipt',
    });
    expect(res.statusCode, res.body).toBe(201);
    const message = res.json();
    expect(message).toMatchObject({
      type: 'image',
      status: 'sent',
      content: 'Your receipt',
      media_url: `${PUBLIC_URL}/v1/media/${id}`,
    });
    // The app (API key or session) reads the file at media_url.
    const file = await acc.call({ method: 'GET', url: `/v1/media/${id}` });
    expect(Buffer.compare(file.rawPayload, ACCEPTED.png.bytes)).toBe(0);

    const given = sentFor(message.id).media!;
    expect(given.url).toMatch(
      new RegExp(`^${PUBLIC_URL}/media/${acc.accountId}/${id}/\\d+\\.[\\w-]{43}/photo\\.png$`),
    );
    expect(given.filename).toBe('photo.png');
    // Anyone holding the link, and no key, gets the bytes.
    const fetched = await t.app.inject({ method: 'GET', url: given.url.slice(PUBLIC_URL.length) });
    expect(fetched.statusCode).toBe(200);
    expect(fetched.headers['content-type']).toBe('image/png');
    expect(Buffer.compare(fetched.rawPayload, ACCEPTED.png.bytes)).toBe(0);
  });

  it('sends an uploaded document with its name', async () => {
    const acc = await newAccount(t);
    const contact = await contactInWindow(acc);
    const id = await uploaded(acc, ACCEPTED.docx.bytes, 'Terms 2025.docx');
    const res = await send(acc, { contact_id: contact.id, type: 'document', media_id: id });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ content: null, media_url: `${PUBLIC_URL}/v1/media/${id}` });
    const given = sentFor(res.json().id).media!;
    expect(given.filename).toBe('Terms 2025.docx');
    expect(given.url.endsWith('/Terms%202025.docx')).toBe(true);
  });

  it('an image message with a PDF is a 422; a document may be an image', async () => {
    const acc = await newAccount(t);
    const contact = await contactInWindow(acc);
    const pdf = await uploaded(acc, ACCEPTED.pdf.bytes, 'a.pdf');
    const refused = await send(acc, { contact_id: contact.id, type: 'image', media_id: pdf });
    const error = expectError(refused, 422, 'media_id');
    expect(error.message).toMatch(/is not an image \(it is application\/pdf\)/);
    const png = await uploaded(acc, ACCEPTED.png.bytes, 'a.png');
    const asDocument = await send(acc, { contact_id: contact.id, type: 'document', media_id: png });
    expect(asDocument.statusCode, asDocument.body).toBe(201);
  });

  it("an unknown media_id, or another account's, is a 404 naming it; nothing is sent", async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const contact = await contactInWindow(acc);
    const theirs = await uploaded(other, ACCEPTED.png.bytes, 'theirs.png');
    for (const id of [theirs, 'med_01J00000000000000000000000']) {
      const res = await send(acc, { contact_id: contact.id, type: 'image', media_id: id });
      const error = expectError(res, 404);
      expect(error.message).toBe(`media ${id} not found`);
    }
    const stored = await t.db
      .selectFrom('messages')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .where('direction', '=', 'outbound')
      .execute();
    expect(stored).toEqual([]);
  });

  it('exactly one of media_url and media_id; neither on text or template', async () => {
    const acc = await newAccount(t);
    const contact = await contactInWindow(acc);
    const id = await uploaded(acc, ACCEPTED.png.bytes, 'a.png');
    const both = await send(acc, {
      contact_id: contact.id,
      type: 'image',
      media_id: id,
      media_url: 'https://cdn.example/a.png',
    });
    expectError(both, 422, 'media_id');
    const neither = await send(acc, { contact_id: contact.id, type: 'image' });
    expectError(neither, 422, 'media_url');
    const text = await send(acc, {
      contact_id: contact.id,
      type: 'text',
      content: 'x',
      media_id: id,
    });
    expectError(text, 422, 'media_id');
  });
});

describe('webchat: a visitor is shown a signed link for a file of ours', () => {
  it("the visitor's messages carry a link that works without a key", async () => {
    const acc = await newAccount(t);
    const widget = await connectWebchat(acc);
    const visitor = (method: 'GET' | 'POST', path: string, token?: string, payload?: object) =>
      t.app.inject({
        method,
        url: `/webchat/v1/${widget.widget_key}/${path}`,
        headers: { origin: ORIGIN, ...(token ? { authorization: `Bearer ${token}` } : {}) },
        ...(payload ? { payload: payload as Record<string, unknown> } : {}),
      });
    const session = await visitor('POST', 'session', undefined, {});
    expect(session.statusCode, session.body).toBe(200);
    const token = session.json().token as string;
    const wrote = await visitor('POST', 'messages', token, {
      client_id: 'c_visitor1',
      content: 'menu?',
    });
    expect(wrote.statusCode, wrote.body).toBe(201);
    const [received] = await t.db
      .selectFrom('messages')
      .innerJoin('conversations', 'conversations.id', 'messages.conversation_id')
      .select('conversations.contact_id')
      .where('messages.account_id', '=', acc.accountId)
      .execute();

    const id = await uploaded(acc, ACCEPTED.jpeg.bytes, 'menu.jpg');
    const res = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: {
        contact_id: received!.contact_id,
        channel: 'webchat',
        type: 'image',
        media_id: id,
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().media_url).toBe(`${PUBLIC_URL}/v1/media/${id}`);

    const listed = await visitor('GET', 'messages', token);
    expect(listed.statusCode, listed.body).toBe(200);
    const image = (listed.json().data as { type: string; media_url: string }[]).find(
      (m) => m.type === 'image',
    )!;
    expect(image.media_url).toMatch(
      new RegExp(`^${PUBLIC_URL}/media/${acc.accountId}/${id}/\\d+\\.[\\w-]{43}$`),
    );
    const fetched = await t.app.inject({
      method: 'GET',
      url: image.media_url.slice(PUBLIC_URL.length),
    });
    expect(fetched.statusCode).toBe(200);
    expect(Buffer.compare(fetched.rawPayload, ACCEPTED.jpeg.bytes)).toBe(0);
  });
});
