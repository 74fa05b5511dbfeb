import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MEDIA_LINK_TTL_MS } from '../../src/media/media-links.js';
import {
  connectedAccount,
  contactWrites,
  createContact,
  PUBLIC_URL,
  send,
  startE2E,
  whatsappBody,
  type Connected,
  type E2E,
} from '../channels/whatsapp-e2e-helpers.js';
import { ACCEPTED, fileUpload } from './sample-files.js';

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

async function uploaded(c: Connected, file: Buffer, name: string): Promise<string> {
  const res = await c.acc.call({ method: 'POST', url: '/v1/media', ...fileUpload(file, name) });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}
/** What Meta would do with the link: fetch it over HTTP from the listening app, with no key. */
function fetchAsMeta(link: string) {
  expect(link.startsWith(`${PUBLIC_URL}/media/`)).toBe(true);
  return fetch(`${e.url}${link.slice(PUBLIC_URL.length)}`);
}

describe('POST /v1/messages/send with media_id on a WhatsApp connection', () => {
  it('sends a document as a link to our signed URL with its file name; Meta fetching it gets the bytes', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    await contactWrites(e, c, contact);
    const id = await uploaded(c, ACCEPTED.pdf.bytes, 'invoice 42.pdf');
    const res = await send(c, {
      contact_id: contact.id,
      type: 'document',
      media_id: id,
      content: 'Your invoice',
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      status: 'sent',
      media_url: `${PUBLIC_URL}/v1/media/${id}`,
    });

    const [req, ...more] = e.graph.find(c.sendMatcher);
    expect(more).toEqual([]);
    const body = JSON.parse(req!.body.toString('utf8')) as {
      document: { link: string; caption: string; filename: string };
    };
    const link = body.document.link;
    expect(link).toMatch(
      new RegExp(
        `^${PUBLIC_URL}/media/${c.acc.accountId}/${id}/\\d+\\.[\\w-]{43}/invoice%2042\\.pdf$`,
      ),
    );
    expect(req!.body.toString('utf8')).toBe(
      whatsappBody(contact.phone, 'document', {
        link,
        caption: 'Your invoice',
        filename: 'invoice 42.pdf',
      }),
    );

    const fetched = await fetchAsMeta(link);
    expect(fetched.status).toBe(200);
    expect(fetched.headers.get('content-type')).toBe('application/pdf');
    expect(fetched.headers.get('x-content-type-options')).toBe('nosniff');
    expect(fetched.headers.get('content-disposition')).toBe(
      "attachment; filename*=UTF-8''invoice%2042.pdf",
    );
    expect(Buffer.compare(Buffer.from(await fetched.arrayBuffer()), ACCEPTED.pdf.bytes)).toBe(0);

    // Altered, it is refused; once expired, too.
    const tampered = link.replace(/\.([\w-]{43})\//, (_, mac: string) => `.${mac.slice(1)}A/`);
    expect((await fetchAsMeta(tampered)).status).toBe(403);
    e.t.clock.advance(MEDIA_LINK_TTL_MS + 10 * 60_000);
    try {
      const expired = await fetchAsMeta(link);
      expect(expired.status).toBe(403);
      expect(((await expired.json()) as { error: { message: string } }).error.message).toMatch(
        /expired/,
      );
    } finally {
      e.t.clock.advance(-(MEDIA_LINK_TTL_MS + 10 * 60_000));
    }
  });

  it('sends an image as a link; an image message with a document is refused before Meta hears of it', async () => {
    const c = await connectedAccount(e);
    const contact = await createContact(c.acc);
    await contactWrites(e, c, contact);
    const png = await uploaded(c, ACCEPTED.png.bytes, 'photo.png');
    const res = await send(c, { contact_id: contact.id, type: 'image', media_id: png });
    expect(res.statusCode, res.body).toBe(201);
    const [req] = e.graph.find(c.sendMatcher);
    const link = (JSON.parse(req!.body.toString('utf8')) as { image: { link: string } }).image.link;
    const fetched = await fetchAsMeta(link);
    expect(fetched.headers.get('content-type')).toBe('image/png');
    expect(Buffer.compare(Buffer.from(await fetched.arrayBuffer()), ACCEPTED.png.bytes)).toBe(0);

    e.graph.reset();
    const xlsx = await uploaded(c, ACCEPTED.xlsx.bytes, 'prices.xlsx');
    const refused = await send(c, { contact_id: contact.id, type: 'image', media_id: xlsx });
    expect(refused.statusCode).toBe(422);
    expect(e.graph.find(c.sendMatcher)).toEqual([]);
  });
});
