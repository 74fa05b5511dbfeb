import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MEDIA_MAX_BYTES } from '../../src/messages/media.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { startFailingServers } from '../failing-servers.js';
import { startHttpsServer, type Reply } from '../https-server.js';
import {
  createContact,
  createTemplate,
  expectError,
  expectStatus,
  freezeClock,
  receive,
  sendText,
} from '../inbox-helpers.js';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
const PDF = Buffer.from('%PDF-1.4\n%test document\n');
const DAY = 24 * 60 * 60 * 1000;

let t: TestApp;
let media: Awaited<ReturnType<typeof startHttpsServer>>;

beforeAll(async () => {
  t = await startTestApp();
  media = await startHttpsServer((req): Reply => {
    switch (req.url) {
      case '/pic.png':
        return { status: 200, headers: { 'content-type': 'image/png' }, body: PNG };
      case '/doc.pdf':
        return { status: 200, headers: { 'content-type': 'application/pdf' }, body: PDF };
      case '/page.html':
        return {
          status: 200,
          headers: { 'content-type': 'text/html; charset=utf-8' },
          body: '<html></html>',
        };
      case '/moved.png':
        return { status: 302, headers: { location: media.url('/pic.png') } };
      case '/downgrade.png':
        return { status: 302, headers: { location: `http://localhost:${media.port}/pic.png` } };
      default:
        return { status: 404, headers: { 'content-type': 'text/plain' }, body: 'not found' };
    }
  });
});
afterAll(async () => {
  await media.close();
  await t.close();
});

function send(acc: TestAccount, payload: Record<string, unknown>) {
  return acc.call({ method: 'POST', url: '/v1/messages/send', payload });
}

describe('POST /v1/messages/send: message kinds', () => {
  it('a text on webchat answers 201 with an outbound message in status sent', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const res = await sendText(acc, contact.id, 'webchat', 'hello');
    expectStatus(res, 201);
    const m = res.json();
    expect(m).toMatchObject({
      direction: 'outbound',
      status: 'sent',
      type: 'text',
      content: 'hello',
      media_url: null,
      failure_reason: null,
    });
    expect(m.id).toMatch(/^msg_/);
    expect(m.conversation_id).toMatch(/^conv_/);
    expect(new Date(m.created_at).toISOString()).toBe(m.created_at);
  });

  it('a text on whatsapp inside the 24-hour window is sent', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    await receive(acc, contact.id, 'whatsapp');
    const res = await sendText(acc, contact.id, 'whatsapp', 'thanks for writing');
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({
      direction: 'outbound',
      status: 'sent',
      content: 'thanks for writing',
    });
  });

  it('a template message carries the rendered text with {{n}} filled in order', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hi {{1}}, order {{2}} has shipped. Bye {{1}}!');
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
      template_params: ['Ann', '#42'],
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({
      type: 'template',
      direction: 'outbound',
      status: 'sent',
      content: 'Hi Ann, order #42 has shipped. Bye Ann!',
    });
  });

  it('template parameter values are inserted as they are, never expanded again', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, '{{1}} and {{2}}');
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'webchat',
      type: 'template',
      template_name: tpl.name,
      template_params: ['{{2}}', '$1 $&'],
    });
    expectStatus(res, 201);
    expect(res.json().content).toBe('{{2}} and $1 $&');
  });

  it('an image is fetched from media_url and has content null without a caption', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const before = media.requests.length;
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'webchat',
      type: 'image',
      media_url: media.url('/pic.png'),
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({
      type: 'image',
      content: null,
      status: 'sent',
      media_url: media.url('/pic.png'),
    });
    expect(media.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /pic.png',
    ]);
  });

  it('an image with a caption keeps the caption as content', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'webchat',
      type: 'image',
      media_url: media.url('/pic.png'),
      content: 'our new logo',
    });
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ type: 'image', content: 'our new logo' });
  });

  it('a document is fetched and has content null without a caption, the caption with one', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const plain = await send(acc, {
      contact_id: contact.id,
      channel: 'webchat',
      type: 'document',
      media_url: media.url('/doc.pdf'),
    });
    expectStatus(plain, 201);
    expect(plain.json()).toMatchObject({ type: 'document', content: null, status: 'sent' });
    const captioned = await send(acc, {
      contact_id: contact.id,
      channel: 'webchat',
      type: 'document',
      media_url: media.url('/doc.pdf'),
      content: 'your invoice',
    });
    expectStatus(captioned, 201);
    expect(captioned.json()).toMatchObject({ type: 'document', content: 'your invoice' });
  });
});

describe('POST /v1/messages/send: fields per type', () => {
  let acc: TestAccount;
  let contactId: string;
  beforeAll(async () => {
    acc = await newAccount(t);
    contactId = (await createContact(acc)).id;
  });

  it('text without content is a 422 naming content', async () => {
    expectError(
      await send(acc, { contact_id: contactId, channel: 'webchat', type: 'text' }),
      422,
      'content',
    );
  });

  it('template without template_name is a 422 naming template_name', async () => {
    expectError(
      await send(acc, { contact_id: contactId, channel: 'webchat', type: 'template' }),
      422,
      'template_name',
    );
  });

  it('image and document without media_url are a 422 naming media_url', async () => {
    expectError(
      await send(acc, { contact_id: contactId, channel: 'webchat', type: 'image' }),
      422,
      'media_url',
    );
    expectError(
      await send(acc, {
        contact_id: contactId,
        channel: 'webchat',
        type: 'document',
        content: 'caption only',
      }),
      422,
      'media_url',
    );
  });

  it('fields that do not belong to the type are a 422 naming them', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ type: 'text', content: 'x', template_name: 'welcome' }, 'template_name'],
      [{ type: 'text', content: 'x', template_params: ['a'] }, 'template_params'],
      [{ type: 'text', content: 'x', media_url: media.url('/pic.png') }, 'media_url'],
      [{ type: 'template', template_name: 'welcome', content: 'x' }, 'content'],
      [
        { type: 'template', template_name: 'welcome', media_url: media.url('/pic.png') },
        'media_url',
      ],
      [
        { type: 'image', media_url: media.url('/pic.png'), template_name: 'welcome' },
        'template_name',
      ],
      [
        { type: 'document', media_url: media.url('/doc.pdf'), template_params: ['a'] },
        'template_params',
      ],
    ];
    for (const [body, field] of cases) {
      expectError(
        await send(acc, { contact_id: contactId, channel: 'webchat', ...body }),
        422,
        field,
      );
    }
    expect(
      await t.db
        .selectFrom('messages')
        .select('id')
        .where('account_id', '=', acc.accountId)
        .execute(),
    ).toEqual([]);
  });

  it('an unknown body field is a 422 naming it', async () => {
    expectError(
      await send(acc, {
        contact_id: contactId,
        channel: 'webchat',
        type: 'text',
        content: 'x',
        priority: 'high',
      }),
      422,
      'priority',
    );
  });

  it('an unknown channel or type is a 422', async () => {
    expectError(
      await send(acc, { contact_id: contactId, channel: 'sms', type: 'text', content: 'x' }),
      422,
      'channel',
    );
    expectError(
      await send(acc, { contact_id: contactId, channel: 'webchat', type: 'audio', content: 'x' }),
      422,
      'type',
    );
  });
});

describe('POST /v1/messages/send: references', () => {
  it('an unknown contact is a 404', async () => {
    const acc = await newAccount(t);
    const res = await sendText(acc, 'con_00000000000000000000000000');
    expect(expectError(res, 404).message).toContain('con_00000000000000000000000000');
  });

  it('an unknown template is a 404 naming it', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: 'no_such_template',
    });
    expect(expectError(res, 404).message).toContain('no_such_template');
  });

  it('a pending template is a 422', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello', null);
    expect(tpl.status).toBe('pending');
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
    });
    expect(expectError(res, 422, 'template_name').message).toContain('pending');
  });

  it('a rejected template is a 422', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hello', 'rejected');
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
    });
    expect(expectError(res, 422, 'template_name').message).toContain('rejected');
  });

  it('template_params must supply exactly as many values as placeholders (too few and too many are 422)', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'Hi {{1}}, your code is {{2}}');
    const base = {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
    };
    expectError(await send(acc, base), 422, 'template_params');
    expectError(await send(acc, { ...base, template_params: ['Ann'] }), 422, 'template_params');
    expectError(
      await send(acc, { ...base, template_params: ['Ann', '1234', 'extra'] }),
      422,
      'template_params',
    );
    expectStatus(await send(acc, { ...base, template_params: ['Ann', '1234'] }), 201);
    const noParams = await createTemplate(acc, 'No placeholders here');
    expectError(
      await send(acc, { ...base, template_name: noParams.name, template_params: ['x'] }),
      422,
      'template_params',
    );
  });
});

describe('POST /v1/messages/send: the conversation', () => {
  it('the first send creates the conversation and later sends reuse it', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const first = await sendText(acc, contact.id, 'webchat', 'one');
    expectStatus(first, 201);
    const second = await sendText(acc, contact.id, 'webchat', 'two');
    expectStatus(second, 201);
    expect(second.json().conversation_id).toBe(first.json().conversation_id);
    const conv = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${first.json().conversation_id}`,
    });
    expectStatus(conv, 200);
    expect(conv.json()).toMatchObject({
      contact_id: contact.id,
      channel: 'webchat',
      status: 'open',
      assigned_to: null,
    });
    expect(conv.json().messages.map((m: { content: string }) => m.content)).toEqual(['one', 'two']);
    // Another channel is another conversation.
    await receive(acc, contact.id, 'messenger');
    const onMessenger = await sendText(acc, contact.id, 'messenger', 'three');
    expectStatus(onMessenger, 201);
    expect(onMessenger.json().conversation_id).not.toBe(first.json().conversation_id);
  });

  it('10 concurrent first sends to one (contact, channel) make exactly one conversation', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => sendText(acc, contact.id, 'webchat', `burst ${i}`)),
    );
    for (const r of results) expectStatus(r, 201);
    const rows = await t.db
      .selectFrom('conversations')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .where('contact_id', '=', contact.id)
      .where('channel', '=', 'webchat')
      .execute();
    expect(rows).toHaveLength(1);
    expect(new Set(results.map((r) => r.json().conversation_id))).toEqual(new Set([rows[0]!.id]));
    const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${rows[0]!.id}` });
    expect(conv.json().messages).toHaveLength(10);
  });

  it('replying to a resolved conversation reopens it', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc);
    const first = await sendText(acc, contact.id);
    const convId = first.json().conversation_id;
    const resolved = await acc.call({ method: 'POST', url: `/v1/conversations/${convId}/resolve` });
    expect(resolved.json().status).toBe('resolved');
    const reply = await sendText(acc, contact.id, 'webchat', 'anything else?');
    expectStatus(reply, 201);
    expect(reply.json().conversation_id).toBe(convId);
    const conv = await acc.call({ method: 'GET', url: `/v1/conversations/${convId}` });
    expect(conv.json().status).toBe('open');
  });
});

describe('POST /v1/messages/send: the 24-hour customer service window', () => {
  let w: TestApp;
  beforeAll(async () => {
    w = await startTestApp();
    // Real time must not leak into the exact boundaries below.
    freezeClock(w.clock);
  });
  afterAll(() => w.close());

  for (const channel of ['whatsapp', 'messenger', 'instagram']) {
    it(`${channel}: a text without any inbound message is a 422`, async () => {
      const acc = await newAccount(w);
      const contact = await createContact(acc);
      const res = await sendText(acc, contact.id, channel);
      expect(expectError(res, 422).message).toContain('24-hour');
    });

    it(`${channel}: a text at T+24h-1ms after an inbound at T is sent; at T+24h it is a 422`, async () => {
      const acc = await newAccount(w);
      const contact = await createContact(acc);
      await receive(acc, contact.id, channel);
      w.clock.advance(DAY - 1);
      expectStatus(await sendText(acc, contact.id, channel, 'just in time'), 201);
      w.clock.advance(1);
      expectError(await sendText(acc, contact.id, channel, 'too late'), 422);
      // An image is not a template either.
      expectError(
        await send(acc, {
          contact_id: contact.id,
          channel,
          type: 'image',
          media_url: media.url('/pic.png'),
        }),
        422,
      );
    });
  }

  it('a newer inbound message reopens the window', async () => {
    const acc = await newAccount(w);
    const contact = await createContact(acc);
    await receive(acc, contact.id, 'whatsapp');
    w.clock.advance(DAY);
    expectError(await sendText(acc, contact.id, 'whatsapp'), 422);
    await receive(acc, contact.id, 'whatsapp');
    expectStatus(await sendText(acc, contact.id, 'whatsapp'), 201);
  });

  it('the window is per channel: an inbound on whatsapp does not open instagram', async () => {
    const acc = await newAccount(w);
    const contact = await createContact(acc);
    await receive(acc, contact.id, 'whatsapp');
    expectError(await sendText(acc, contact.id, 'instagram'), 422);
  });

  it('a template may be sent outside the window', async () => {
    const acc = await newAccount(w);
    const contact = await createContact(acc);
    const tpl = await createTemplate(acc, 'We have news for you');
    const res = await send(acc, {
      contact_id: contact.id,
      channel: 'whatsapp',
      type: 'template',
      template_name: tpl.name,
    });
    expectStatus(res, 201);
    expect(res.json().content).toBe('We have news for you');
    await receive(acc, contact.id, 'instagram');
    w.clock.advance(DAY * 3);
    expectStatus(
      await send(acc, {
        contact_id: contact.id,
        channel: 'instagram',
        type: 'template',
        template_name: tpl.name,
      }),
      201,
    );
  });

  it('webchat has no window', async () => {
    const acc = await newAccount(w);
    const contact = await createContact(acc);
    expectStatus(await sendText(acc, contact.id, 'webchat'), 201);
    await receive(acc, contact.id, 'webchat');
    w.clock.advance(DAY * 30);
    expectStatus(await sendText(acc, contact.id, 'webchat'), 201);
  });
});

describe('POST /v1/messages/send: media fetching', () => {
  let acc: TestAccount;
  let contactId: string;
  beforeAll(async () => {
    acc = await newAccount(t);
    contactId = (await createContact(acc)).id;
  });
  const image = (url: string) =>
    send(acc, { contact_id: contactId, channel: 'webchat', type: 'image', media_url: url });

  it('an http:// media_url is a 422 from the schema, never fetched', async () => {
    const before = media.requests.length;
    expectError(await image(`http://localhost:${media.port}/pic.png`), 422, 'media_url');
    expect(media.requests.length).toBe(before);
  });

  it('a media_url answering 404 is a 422 that gives the reason', async () => {
    const error = expectError(await image(media.url('/nothing-here.png')), 422, 'media_url');
    expect(error.message).toContain('404');
  });

  it(
    'a media_url that cannot be reached is one 422 wording, however the connection fails',
    { timeout: 30_000 },
    async () => {
      const failing = await startFailingServers();
      try {
        const urls: Record<string, string> = { 'no such name': 'https://nowhere.invalid/a.png' };
        for (const [failure, port] of Object.entries(failing.ports))
          urls[failure] = `https://localhost:${port}/a.png`;
        const messages = Object.fromEntries(
          await Promise.all(
            Object.entries(urls).map(async ([failure, url]) => [
              failure,
              expectError(await image(url), 422, 'media_url').message,
            ]),
          ),
        );
        const wording =
          'media_url: could not be fetched: no response: the connection failed or nothing came within 10000 ms';
        expect(messages).toEqual(Object.fromEntries(Object.keys(urls).map((f) => [f, wording])));
      } finally {
        await failing.close();
      }
    },
  );

  it('a non-image content type for type image is a 422', async () => {
    const error = expectError(await image(media.url('/page.html')), 422, 'media_url');
    expect(error.message).toContain('text/html');
    // The same file is no document either.
    expectError(
      await send(acc, {
        contact_id: contactId,
        channel: 'webchat',
        type: 'document',
        media_url: media.url('/page.html'),
      }),
      422,
      'media_url',
    );
  });

  it('a body larger than 16 MiB is a 422 (the stream is cut off)', async () => {
    let sent = 0;
    const server = https.createServer(
      {
        key: readFileSync(new URL('../fixtures/tls/server.key', import.meta.url)),
        cert: readFileSync(new URL('../fixtures/tls/server.pem', import.meta.url)),
      },
      (_req, res) => {
        // No Content-Length: the client has to count the bytes as they stream in.
        res.writeHead(200, { 'content-type': 'image/png' });
        const chunk = Buffer.alloc(256 * 1024, 1);
        const limit = MEDIA_MAX_BYTES + 4 * chunk.length;
        const pump = () => {
          while (sent < limit) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        res.on('close', () => res.removeAllListeners('drain'));
        pump();
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const error = expectError(
        await image(`https://localhost:${port}/huge.png`),
        422,
        'media_url',
      );
      expect(error.message).toMatch(/larger than|too large/);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('a redirect to another https URL is followed', async () => {
    const before = media.requests.length;
    const res = await image(media.url('/moved.png'));
    expectStatus(res, 201);
    expect(res.json()).toMatchObject({ type: 'image', status: 'sent' });
    expect(media.requests.slice(before).map((r) => r.url)).toEqual(['/moved.png', '/pic.png']);
  });

  it('a redirect to an http:// URL is refused with a 422', async () => {
    const before = media.requests.length;
    const error = expectError(await image(media.url('/downgrade.png')), 422, 'media_url');
    expect(error.message).toContain('https');
    expect(media.requests.slice(before).map((r) => r.url)).toEqual(['/downgrade.png']);
  });

  it('a failed fetch leaves no message and no conversation behind', async () => {
    const other = await newAccount(t);
    const contact = await createContact(other);
    expectError(
      await send(other, {
        contact_id: contact.id,
        channel: 'webchat',
        type: 'image',
        media_url: media.url('/gone.png'),
      }),
      422,
    );
    expect(
      await t.db
        .selectFrom('conversations')
        .select('id')
        .where('account_id', '=', other.accountId)
        .execute(),
    ).toEqual([]);
    expect(
      await t.db
        .selectFrom('messages')
        .select('id')
        .where('account_id', '=', other.accountId)
        .execute(),
    ).toEqual([]);
  });
});

describe('POST /v1/messages/send: concurrent media fetches (MEDIA_FETCH_CONCURRENCY=4)', () => {
  let p: TestApp;
  let slow: https.Server;
  let port: number;
  let inFlight = 0;
  let maxInFlight = 0;
  let answered = 0;
  beforeAll(async () => {
    p = await startTestApp({ config: { mediaFetchConcurrency: 4 } });
    // A media host that takes its time: every fetch holds its slot for a second and a half.
    slow = https.createServer(
      {
        key: readFileSync(new URL('../fixtures/tls/server.key', import.meta.url)),
        cert: readFileSync(new URL('../fixtures/tls/server.pem', import.meta.url)),
      },
      (_req, res) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        setTimeout(() => {
          inFlight--;
          answered++;
          res.writeHead(200, { 'content-type': 'image/png' });
          res.end(PNG);
        }, 1500);
      },
    );
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    port = (slow.address() as AddressInfo).port;
  });
  afterAll(async () => {
    slow.closeAllConnections();
    await new Promise<void>((resolve) => slow.close(() => resolve()));
    await p.close();
  });

  it('one account holds at most half the slots: 2 of its fetches run at once, 8 sends wait their turn, and the rest get 503 unavailable with Retry-After', async () => {
    const acc = await newAccount(p);
    const contact = await createContact(acc);
    const results = await Promise.all(
      Array.from({ length: 13 }, (_, i) =>
        send(acc, {
          contact_id: contact.id,
          channel: 'webchat',
          type: 'image',
          media_url: `https://localhost:${port}/pic-${i}.png`,
        }),
      ),
    );
    const byStatus = (status: number) => results.filter((r) => r.statusCode === status);
    expect(results.map((r) => r.statusCode).sort()).toEqual([
      ...Array<number>(10).fill(201),
      ...Array<number>(3).fill(503),
    ]);
    for (const refused of byStatus(503)) {
      expect(refused.headers['retry-after']).toBe('5');
      expect(refused.json().error).toMatchObject({
        code: 'unavailable',
        message: expect.stringMatching(/media fetches/),
        request_id: expect.any(String),
      });
    }
    expect(maxInFlight).toBe(2);
    expect(answered).toBe(10);
    // A refused send wrote nothing.
    const messages = await p.db
      .selectFrom('messages')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(messages).toHaveLength(10);

    // Once the queue has drained, sends are taken again.
    const later = await send(acc, {
      contact_id: contact.id,
      channel: 'webchat',
      type: 'image',
      media_url: `https://localhost:${port}/later.png`,
    });
    expectStatus(later, 201);
  });

  it("one account flooding the fetches does not hold up another's: the other's fetch runs at once", async () => {
    const flooding = await newAccount(p);
    const other = await newAccount(p);
    const [theirs, mine] = [await createContact(flooding), await createContact(other)];
    const image = (acc: TestAccount, contactId: string, i: number) =>
      send(acc, {
        contact_id: contactId,
        channel: 'webchat',
        type: 'image',
        media_url: `https://localhost:${port}/flood-${i}.png`,
      });
    maxInFlight = 0;
    let refused = 0;
    const flood = Array.from({ length: 13 }, (_, i) =>
      image(flooding, theirs.id, i).then((res) => {
        if (res.statusCode === 503) refused++;
        return res;
      }),
    );
    // The flood is in: its share of 2 fetching (the media host holds each for 1.5 s), 8 waiting,
    // and 3 refused (which happens only once the 10 before them hold their places).
    for (const deadline = Date.now() + 10_000; !(inFlight === 2 && refused === 3);) {
      if (Date.now() > deadline)
        throw new Error(
          `the flood never filled its share: ${inFlight} fetching, ${refused} refused`,
        );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const answeredBefore = answered;
    const [a, b] = await Promise.all([image(other, mine.id, 100), image(other, mine.id, 101)]);
    expectStatus(a, 201);
    expectStatus(b, 201);
    // Fetched beside the flood's first fetches, not after its queue: of the flood's 10 accepted
    // sends, at most its first two rounds (4) were answered before the other account's two.
    expect(answered - answeredBefore - 2).toBeLessThanOrEqual(4);
    const flooded = await Promise.all(flood);
    expect(flooded.filter((r) => r.statusCode === 503)).toHaveLength(3);
    expect(maxInFlight).toBe(4);
  });
});

describe('POST /v1/messages/send: private media addresses (ALLOW_PRIVATE_TARGETS=false)', () => {
  let p: TestApp;
  let acc: TestAccount;
  let contactId: string;
  beforeAll(async () => {
    p = await startTestApp({ config: { allowPrivateTargets: false } });
    acc = await newAccount(p);
    contactId = (await createContact(acc)).id;
  });
  afterAll(() => p.close());

  it('a media_url on 127.0.0.1 is a 422 mentioning a private address, never fetched', async () => {
    const before = media.requests.length;
    const res = await send(acc, {
      contact_id: contactId,
      channel: 'webchat',
      type: 'image',
      media_url: `https://127.0.0.1:${media.port}/pic.png`,
    });
    expect(expectError(res, 422, 'media_url').message).toContain('private');
    expect(media.requests.length).toBe(before);
  });

  it('a media_url on localhost (resolving to loopback) is a 422 mentioning a private address, never fetched', async () => {
    const before = media.requests.length;
    const res = await send(acc, {
      contact_id: contactId,
      channel: 'webchat',
      type: 'image',
      media_url: media.url('/pic.png'),
    });
    expect(expectError(res, 422, 'media_url').message).toContain('private');
    expect(media.requests.length).toBe(before);
  });

  it('a media_url on [::1] or the metadata address is a 422 mentioning a private address', async () => {
    for (const host of ['[::1]', '169.254.169.254', '[::ffff:127.0.0.1]']) {
      const res = await send(acc, {
        contact_id: contactId,
        channel: 'webchat',
        type: 'document',
        media_url: `https://${host}:${media.port}/doc.pdf`,
      });
      expect(expectError(res, 422, 'media_url').message, host).toContain('private');
    }
  });
});
