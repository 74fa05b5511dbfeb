import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INBOUND_WAIT_DELAYS_MS } from '../../src/inbound/inbound.service.js';
import { MediaRepository } from '../../src/media/media.repository.js';
import { MediaService, MediaUrlRefused } from '../../src/media/media.service.js';
import { META_ERRORS } from '../fake-graph/server.js';
import { inboundWebhook, postSignedWebhook, waMessage } from '../fake-graph/webhooks.js';
import { newAccount, randomPhone, type TestAccount } from '../helpers.js';
import {
  connectWhatsApp,
  GRAPH_VERSION,
  PUBLIC_URL,
  startInboundHarness,
  type InboundHarness,
  type WhatsAppConnection,
} from '../channels/inbound-harness.js';

const MAX_BYTES = 64 * 1024;

let h: InboundHarness;
beforeAll(async () => {
  h = await startInboundHarness({ mediaMaxBytes: MAX_BYTES });
});
afterAll(() => h.close());

async function setup(): Promise<{ acc: TestAccount; conn: WhatsAppConnection; from: string }> {
  const acc = await newAccount(h.t);
  const conn = await connectWhatsApp(h, acc.accountId);
  return { acc, conn, from: randomPhone().slice(1) };
}
function mediaId(): string {
  return String(1_000_000_000_000 + Math.floor(Math.random() * 1e12));
}
function addMedia(conn: WhatsAppConnection, bytes: Buffer, mimeType: string): string {
  const id = mediaId();
  h.graph.addMedia({ id, bytes, mimeType, phoneNumberId: conn.phoneNumberId });
  return id;
}
async function deliver(
  acc: TestAccount,
  conn: WhatsAppConnection,
  from: string,
  ...messages: Record<string, unknown>[]
) {
  const res = await postSignedWebhook(
    conn.webhookUrl,
    inboundWebhook(
      { phoneNumberId: conn.phoneNumberId, businessAccountId: conn.businessAccountId },
      { waId: from, name: 'Media Sender' },
      ...messages,
    ),
    conn.appSecret,
  );
  expect(res.status).toBe(200);
  await h.drain(acc.accountId);
}
async function inboundMessages(accountId: string) {
  return h.t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('direction', '=', 'inbound')
    .orderBy('id')
    .execute();
}
function getMedia(acc: TestAccount, url: string) {
  expect(url.startsWith(`${PUBLIC_URL}/v1/media/`)).toBe(true);
  return h.app.inject({
    method: 'GET',
    url: url.slice(PUBLIC_URL.length),
    headers: { authorization: `Bearer ${acc.apiKey}` },
  });
}

describe('inbound media: downloaded through Graph, kept, served at GET /v1/media/{id}', () => {
  it('keeps an image with its content type and caption; the media_url serves the same bytes', async () => {
    const { acc, conn, from } = await setup();
    const bytes = randomBytes(20_000);
    const id = addMedia(conn, bytes, 'image/jpeg');
    await deliver(acc, conn, from, waMessage.image(from, { id, caption: 'my receipt' }));
    const [message] = await inboundMessages(acc.accountId);
    expect(message).toMatchObject({ type: 'image', content: 'my receipt' });
    // The lookup and the download both carried the connection's token.
    const lookups = h.graph.find({ method: 'GET', resource: id });
    expect(lookups).toHaveLength(1);
    expect(lookups[0]!.path).toBe(`/${GRAPH_VERSION}/${id}`);
    expect(lookups[0]!.token).toBe(conn.accessToken);
    const downloads = h.graph.find(
      (r) => r.resource === 'whatsapp_business/attachments' && r.query.mid === id,
    );
    expect(downloads.map((r) => r.token)).toEqual([conn.accessToken]);

    const res = await getMedia(acc, message!.media_url!);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('image/jpeg');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(Buffer.compare(res.rawPayload, bytes)).toBe(0);
  });

  it('keeps documents, audio, video and stickers as documents with their own content types', async () => {
    const { acc, conn, from } = await setup();
    const files = {
      document: { bytes: Buffer.from('%PDF-1.4 invoice'), type: 'application/pdf' },
      audio: { bytes: randomBytes(3000), type: 'audio/ogg' },
      video: { bytes: randomBytes(5000), type: 'video/mp4' },
      sticker: { bytes: randomBytes(800), type: 'image/webp' },
    };
    const ids = Object.fromEntries(
      Object.entries(files).map(([k, f]) => [k, addMedia(conn, f.bytes, f.type)]),
    ) as Record<keyof typeof files, string>;
    await deliver(
      acc,
      conn,
      from,
      waMessage.document(from, { id: ids.document, filename: 'invoice.pdf', caption: 'Invoice' }),
      waMessage.audio(from, { id: ids.audio, mimeType: 'audio/ogg' }),
      waMessage.video(from, { id: ids.video, caption: 'unboxing' }),
      waMessage.sticker(from, { id: ids.sticker }),
    );
    const messages = await inboundMessages(acc.accountId);
    expect(messages.map((m) => [m.type, m.content])).toEqual([
      ['document', 'Invoice'],
      ['document', null],
      ['document', 'unboxing'],
      ['document', null],
    ]);
    const kinds = Object.keys(files) as (keyof typeof files)[];
    for (const [i, m] of messages.entries()) {
      const res = await getMedia(acc, m.media_url!);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe(files[kinds[i]!].type);
      expect(Buffer.compare(res.rawPayload, files[kinds[i]!].bytes)).toBe(0);
    }
    const doc = await getMedia(acc, messages[0]!.media_url!);
    expect(doc.headers['content-disposition']).toBe("attachment; filename*=UTF-8''invoice.pdf");
  });

  it("is a 404 for another account's media, for an unknown id, and a 401 without a key", async () => {
    const { acc, conn, from } = await setup();
    const id = addMedia(conn, randomBytes(100), 'image/png');
    await deliver(acc, conn, from, waMessage.image(from, { id, mimeType: 'image/png' }));
    const [message] = await inboundMessages(acc.accountId);
    const other = await newAccount(h.t);
    const res = await getMedia(other, message!.media_url!);
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('not_found');
    expect((await getMedia(acc, `${PUBLIC_URL}/v1/media/med_nope`)).statusCode).toBe(404);
    const anonymous = await h.app.inject({
      method: 'GET',
      url: message!.media_url!.slice(PUBLIC_URL.length),
    });
    expect(anonymous.statusCode).toBe(401);
  });

  it('retries a download that failed for a passing reason, then records the message with its file once', async () => {
    const { acc, conn, from } = await setup();
    const bytes = randomBytes(1000);
    const id = addMedia(conn, bytes, 'image/jpeg');
    h.graph.failNext({ method: 'GET', resource: id }, 2, META_ERRORS.apiService);
    await deliver(acc, conn, from, waMessage.image(from, { id }));
    expect(await inboundMessages(acc.accountId)).toEqual([]);
    h.t.clock.advance(INBOUND_WAIT_DELAYS_MS[0]!);
    await h.drain(acc.accountId);
    expect(await inboundMessages(acc.accountId)).toEqual([]);
    h.t.clock.advance(INBOUND_WAIT_DELAYS_MS[1]!);
    await h.drain(acc.accountId);
    const [message] = await inboundMessages(acc.accountId);
    expect(message).toMatchObject({ type: 'image' });
    const res = await getMedia(acc, message!.media_url!);
    expect(Buffer.compare(res.rawPayload, bytes)).toBe(0);
    const kept = await h.t.db
      .selectFrom('media')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(kept).toHaveLength(1);
  });

  it('after the last retry, records the message as text with a note and the caption', async () => {
    const { acc, conn, from } = await setup();
    const id = addMedia(conn, randomBytes(1000), 'image/jpeg');
    h.graph.failNext({ method: 'GET', resource: id }, 100, META_ERRORS.apiService);
    await deliver(acc, conn, from, waMessage.image(from, { id, caption: 'see this' }));
    for (const delay of INBOUND_WAIT_DELAYS_MS) {
      expect(await inboundMessages(acc.accountId)).toEqual([]);
      h.t.clock.advance(delay);
      await h.drain(acc.accountId);
    }
    h.graph.reset();
    const [message] = await inboundMessages(acc.accountId);
    expect(message).toMatchObject({ type: 'text', media_url: null });
    expect(message!.content).toMatch(
      /^\[image not available: looking the file up failed: \(#2\) .+\]\nsee this$/,
    );
  });

  it('records at once with a note when retrying cannot help (unknown media id, file too large)', async () => {
    const { acc, conn, from } = await setup();
    const tooLarge = addMedia(conn, randomBytes(MAX_BYTES + 1), 'video/mp4');
    await deliver(
      acc,
      conn,
      from,
      waMessage.document(from, { id: '424242424242' }),
      waMessage.video(from, { id: tooLarge }),
    );
    const messages = await inboundMessages(acc.accountId);
    expect(messages.map((m) => [m.type, m.content])).toEqual([
      [
        'text',
        expect.stringMatching(/^\[document not available: looking the file up failed: \(#100\)/),
      ],
      ['text', `[video not available: the file is larger than ${MAX_BYTES} bytes]`],
    ]);
  });
});

describe('download URLs handed out by Graph', () => {
  const service = (allowPrivate: boolean, addresses: Record<string, string[]> = {}) =>
    new MediaService({
      media: new MediaRepository(h.t.db),
      clock: h.t.clock,
      publicUrl: PUBLIC_URL,
      allowPrivate,
      lookup: async (host) => {
        const found = addresses[host];
        if (!found) throw new Error('ENOTFOUND');
        return found;
      },
    });

  it('refuses private, loopback, link-local and metadata addresses, and plain http', async () => {
    const guard = service(false, {
      'lookaside.fbsbx.com': ['157.240.1.1'],
      'evil.example': ['10.0.0.5'],
      'mixed.example': ['157.240.1.1', '127.0.0.1'],
      'compatible.example': ['::a9fe:a9fe'],
    });
    await expect(guard.checkDownloadUrl('https://lookaside.fbsbx.com/x?mid=1')).resolves.toBe(
      undefined,
    );
    for (const url of [
      'https://evil.example/x',
      'https://mixed.example/x',
      'https://127.0.0.1/x',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/x',
      'https://[::ffff:10.0.0.1]/x',
      'https://compatible.example/x',
      'https://[::169.254.169.254]/x',
      'https://[::127.0.0.1]/x',
      'http://lookaside.fbsbx.com/x',
      'https://user:pw@lookaside.fbsbx.com/x',
      'not a url',
    ]) {
      await expect(guard.checkDownloadUrl(url), url).rejects.toBeInstanceOf(MediaUrlRefused);
    }
    // A name that does not resolve may resolve later: an ordinary (retried) failure.
    const unresolved = guard.checkDownloadUrl('https://nowhere.example/x');
    await expect(unresolved).rejects.toThrow('does not resolve');
    await expect(unresolved).rejects.not.toBeInstanceOf(MediaUrlRefused);
  });

  it('lets them through with ALLOW_PRIVATE_TARGETS (development and tests)', async () => {
    await expect(service(true).checkDownloadUrl('http://127.0.0.1:1234/x')).resolves.toBe(
      undefined,
    );
  });
});
