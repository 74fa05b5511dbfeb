import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MEDIA_LINK_TTL_MS } from '../../src/media/media-links.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { ACCEPTED, fileUpload, multipart, REFUSED } from './sample-files.js';

const PUBLIC_URL = 'https://switchboard.uploads.example';
const MAX_BYTES = 64 * 1024;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    config: { publicUrl: PUBLIC_URL, secretsKey: randomBytes(32), mediaMaxBytes: MAX_BYTES },
  });
});
afterAll(() => t.close());

function upload(
  acc: TestAccount,
  body: { payload: Buffer; headers: Record<string, string> },
  headers: Record<string, string> = {},
) {
  return acc.call({
    method: 'POST',
    url: '/v1/media',
    payload: body.payload,
    headers: { ...body.headers, ...headers },
  });
}
function getMedia(acc: TestAccount, id: string) {
  return acc.call({ method: 'GET', url: `/v1/media/${id}` });
}
function expectRefused(
  res: { statusCode: number; json(): { error: { code: string; message: string } } },
  status: number,
  code: string,
  message?: RegExp,
) {
  expect(res.statusCode, JSON.stringify(res.json())).toBe(status);
  expect(res.json().error.code).toBe(code);
  if (message) expect(res.json().error.message).toMatch(message);
}

describe('POST /v1/media: the type is told by the bytes', () => {
  for (const [name, file] of Object.entries(ACCEPTED)) {
    it(`takes ${name} (${file.contentType}) and serves the same bytes back`, async () => {
      const acc = await newAccount(t);
      // Named and declared as something else: neither counts.
      const res = await upload(acc, fileUpload(file.bytes, `upload.${file.ext}`, 'text/plain'));
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json();
      expect(body).toEqual({
        id: expect.stringMatching(/^med_[0-9A-Z]{26}$/),
        content_type: file.contentType,
        size: file.bytes.length,
        filename: `upload.${file.ext}`,
      });
      const got = await getMedia(acc, body.id);
      expect(got.statusCode).toBe(200);
      expect(got.headers['content-type']).toBe(file.contentType);
      expect(got.headers['x-content-type-options']).toBe('nosniff');
      expect(Buffer.compare(got.rawPayload, file.bytes)).toBe(0);
    });
  }

  it('takes a PNG named .pdf and declared application/pdf as a PNG, renamed .png', async () => {
    const acc = await newAccount(t);
    const res = await upload(acc, fileUpload(ACCEPTED.png.bytes, 'receipt.pdf', 'application/pdf'));
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({ content_type: 'image/png', filename: 'receipt.png' });
  });

  it('keeps the name without its path or control characters; no name at all is file.<ext>', async () => {
    const acc = await newAccount(t);
    const named = await upload(acc, fileUpload(ACCEPTED.pdf.bytes, 'C:\\Users\\me\\Q3 report.PDF'));
    expect(named.json().filename).toBe('Q3 report.pdf');
    const unicode = await upload(acc, fileUpload(ACCEPTED.jpeg.bytes, 'фото кошки.jpeg'));
    expect(unicode.json().filename).toBe('фото кошки.jpeg');
    const nameless = await upload(
      acc,
      multipart([
        { name: 'file', filename: '', type: 'application/octet-stream', data: ACCEPTED.webp.bytes },
      ]),
    );
    expect(nameless.statusCode, nameless.body).toBe(201);
    expect(nameless.json().filename).toBe('file.webp');
  });

  for (const [name, bytes] of Object.entries(REFUSED)) {
    it(`refuses ${name} with a 422 naming the file`, async () => {
      const acc = await newAccount(t);
      const res = await upload(acc, fileUpload(bytes, 'innocent.pdf', 'application/pdf'));
      expectRefused(res, 422, 'validation_error', /^file: is not a file of an accepted type/);
      expect(res.json().error.details).toEqual([{ field: 'file', issue: expect.any(String) }]);
    });
  }
});

describe('POST /v1/media: bodies that are wrong get clear answers, never a 500', () => {
  it('takes a file of exactly MEDIA_MAX_BYTES; one byte more is a 413 payload_too_large', async () => {
    const acc = await newAccount(t);
    const fits = Buffer.concat([
      ACCEPTED.pdf.bytes,
      Buffer.alloc(MAX_BYTES - ACCEPTED.pdf.bytes.length, 0x20),
    ]);
    const ok = await upload(acc, fileUpload(fits, 'big.pdf'));
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().size).toBe(MAX_BYTES);
    const res = await upload(acc, fileUpload(Buffer.concat([fits, Buffer.from(' ')]), 'big.pdf'));
    expectRefused(res, 413, 'payload_too_large', new RegExp(`larger than ${MAX_BYTES} bytes`));
    // A body many times the JSON limit is read no further than the file's limit.
    const huge = await upload(acc, fileUpload(Buffer.alloc(4 * 1024 * 1024, 1), 'huge.pdf'));
    expectRefused(huge, 413, 'payload_too_large');
  });

  it('a missing file part, a form field instead, an empty body: 422 on file', async () => {
    const acc = await newAccount(t);
    expectRefused(await upload(acc, multipart([])), 422, 'validation_error', /^file: is required/);
    expectRefused(
      await upload(acc, multipart([{ name: 'file', data: 'not a file' }])),
      422,
      'validation_error',
      /^file: must be a file part/,
    );
    expectRefused(
      await upload(
        acc,
        multipart([{ name: 'document', filename: 'a.pdf', data: ACCEPTED.pdf.bytes }]),
      ),
      422,
      'validation_error',
      /^document: unknown part/,
    );
    expectRefused(
      await upload(acc, fileUpload(Buffer.alloc(0), 'empty.pdf')),
      422,
      'validation_error',
      /^file: is empty/,
    );
  });

  it('several files are a 422, and nothing is kept', async () => {
    const acc = await newAccount(t);
    const res = await upload(
      acc,
      multipart([
        { name: 'file', filename: 'a.pdf', data: ACCEPTED.pdf.bytes },
        { name: 'file', filename: 'b.png', data: ACCEPTED.png.bytes },
      ]),
    );
    expectRefused(res, 422, 'validation_error', /^file: must be sent once/);
    const kept = await t.db
      .selectFrom('media')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(kept).toEqual([]);
  });

  it('JSON, a body cut short or one without its boundary is a 400', async () => {
    const acc = await newAccount(t);
    const json = await acc.call({ method: 'POST', url: '/v1/media', payload: { file: 'x' } });
    expectRefused(json, 400, 'invalid_request', /multipart\/form-data/);
    const whole = fileUpload(ACCEPTED.pdf.bytes, 'a.pdf');
    const cut = await upload(acc, {
      ...whole,
      payload: whole.payload.subarray(0, whole.payload.length - 20),
    });
    expectRefused(cut, 400, 'invalid_request', /multipart body is malformed/);
    const noBoundary = await upload(acc, {
      payload: whole.payload,
      headers: { 'content-type': 'multipart/form-data' },
    });
    expectRefused(noBoundary, 400, 'invalid_request');
  });

  it('needs an API key, and other JSON routes still refuse multipart', async () => {
    const body = fileUpload(ACCEPTED.pdf.bytes, 'a.pdf');
    const anonymous = await t.app.inject({ method: 'POST', url: '/v1/media', ...body });
    expect(anonymous.statusCode).toBe(401);
    const acc = await newAccount(t);
    const contacts = await acc.call({ method: 'POST', url: '/v1/contacts', ...body });
    expect(contacts.statusCode).toBe(400);
    expect(contacts.json().error.code).toBe('invalid_request');
  });
});

describe('POST /v1/media: accounts and idempotency', () => {
  it("another account's file is a 404", async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const { id } = (await upload(acc, fileUpload(ACCEPTED.png.bytes, 'a.png'))).json();
    expectRefused(await getMedia(other, id), 404, 'not_found');
    expect((await getMedia(acc, id)).statusCode).toBe(200);
  });

  it('a retry with the same key and parts, under another boundary, replays the first answer', async () => {
    const acc = await newAccount(t);
    const key = { 'idempotency-key': `upload-${Math.random()}` };
    const first = await upload(acc, fileUpload(ACCEPTED.png.bytes, 'a.png', 'image/png'), key);
    expect(first.statusCode).toBe(201);
    const again = await upload(
      acc,
      multipart([{ name: 'file', filename: 'a.png', data: ACCEPTED.png.bytes }], 'other-boundary'),
      key,
    );
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    const kept = await t.db
      .selectFrom('media')
      .select('id')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(kept).toHaveLength(1);
    // Other bytes, or another name, under the same key: refused.
    const otherFile = await upload(acc, fileUpload(ACCEPTED.jpeg.bytes, 'a.png'), key);
    expectRefused(otherFile, 422, 'idempotency_error');
    const otherName = await upload(acc, fileUpload(ACCEPTED.png.bytes, 'b.png'), key);
    expectRefused(otherName, 422, 'idempotency_error');
  });
});

describe('a real multipart request over HTTP', () => {
  it('a FormData upload through fetch is kept as sent', async () => {
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const acc = await newAccount(t);
    const form = new FormData();
    form.append(
      'file',
      new Blob([ACCEPTED.docx.bytes], { type: 'application/zip' }),
      'Contract v2.docx',
    );
    const res = await fetch(`${address}/v1/media`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acc.apiKey}` },
      body: form,
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { id: string; filename: string; content_type: string };
    expect(body).toMatchObject({
      filename: 'Contract v2.docx',
      content_type: ACCEPTED.docx.contentType,
    });
    const got = await getMedia(acc, body.id);
    expect(Buffer.compare(got.rawPayload, ACCEPTED.docx.bytes)).toBe(0);
    expect(got.headers['content-disposition']).toBe(
      `attachment; filename*=UTF-8''Contract%20v2.docx`,
    );
  });
});

describe('GET /media/{account_id}/{id}/{signature}: signed links', () => {
  async function uploaded(acc: TestAccount, file: Buffer, name: string) {
    const { id } = (await upload(acc, fileUpload(file, name))).json();
    return id as string;
  }
  const pathOf = (link: string) => {
    expect(link.startsWith(`${PUBLIC_URL}/media/`)).toBe(true);
    return link.slice(PUBLIC_URL.length);
  };

  it('serves the bytes without a key, with nosniff and the name to save it under', async () => {
    const acc = await newAccount(t);
    const id = await uploaded(acc, ACCEPTED.pdf.bytes, 'invoice 7.pdf');
    const link = t.services.media.publicLink(
      acc.accountId,
      `${PUBLIC_URL}/v1/media/${id}`,
      'invoice 7.pdf',
    )!;
    expect(link).toMatch(
      new RegExp(
        `^${PUBLIC_URL}/media/${acc.accountId}/${id}/\\d+\\.[\\w-]{43}/invoice%207\\.pdf$`,
      ),
    );
    for (const path of [pathOf(link), pathOf(link).replace(/\/[^/]+$/, '')]) {
      const res = await t.app.inject({ method: 'GET', url: path });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/pdf');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-disposition']).toBe(
        `attachment; filename*=UTF-8''invoice%207.pdf`,
      );
      expect(Buffer.compare(res.rawPayload, ACCEPTED.pdf.bytes)).toBe(0);
    }
  });

  it('refuses a tampered link, another file or account in it, and an expired one (403); a bad id 404', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const id = await uploaded(acc, ACCEPTED.png.bytes, 'a.png');
    const otherId = await uploaded(other, ACCEPTED.png.bytes, 'b.png');
    const path = pathOf(
      t.services.media.publicLink(acc.accountId, `${PUBLIC_URL}/v1/media/${id}`)!,
    );
    const [, , account, media, signature] = path.split('/');
    expect([account, media]).toEqual([acc.accountId, id]);
    const [expires, mac] = signature!.split('.') as [string, string];
    const tampered = [
      `${account}/${media}/${expires}.${mac.slice(0, -2)}AA`,
      `${account}/${otherId}/${expires}.${mac}`,
      `${other.accountId}/${media}/${expires}.${mac}`,
      `${account}/${media}/${Number(expires) + 3600}.${mac}`,
      `${account}/${media}/${expires}`,
      `${account}/${media}/nonsense`,
    ];
    for (const bad of tampered) {
      const res = await t.app.inject({ method: 'GET', url: `/media/${bad}` });
      expectRefused(res, 403, 'forbidden', /not valid/);
    }
    t.clock.advance(MEDIA_LINK_TTL_MS + 10 * 60_000);
    try {
      expectRefused(await t.app.inject({ method: 'GET', url: path }), 403, 'forbidden', /expired/);
    } finally {
      t.clock.advance(-(MEDIA_LINK_TTL_MS + 10 * 60_000));
    }
    expect((await t.app.inject({ method: 'GET', url: path })).statusCode).toBe(200);
    // Genuinely signed, but for a file the account does not have.
    const ghost = t.services.media.publicLink(acc.accountId, `${PUBLIC_URL}/v1/media/med_ghost`)!;
    expectRefused(await t.app.inject({ method: 'GET', url: pathOf(ghost) }), 404, 'not_found');
  });

  it('is not made for URLs that are not our own files', () => {
    expect(t.services.media.publicLink('acc_x', 'https://cdn.example/v1/media/med_1')).toBeNull();
    expect(t.services.media.publicLink('acc_x', `${PUBLIC_URL}/v1/media/../admin`)).toBeNull();
  });
});
