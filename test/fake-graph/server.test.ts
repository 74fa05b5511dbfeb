import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  GraphClient,
  GraphError,
  classifyGraphError,
} from '../../src/channels/meta/graph-client.js';
import { META_ERRORS, postWebhook, startFakeGraph, type FakeGraph } from './server.js';

const PHONE = {
  id: '106540352242922',
  token: 'EAAG-phone-token',
  display_phone_number: '+1 555-010-0001',
  verified_name: 'Acme',
  business_account_id: '102290129340398',
};

let graph: FakeGraph;
let client: GraphClient;

beforeAll(async () => {
  graph = await startFakeGraph();
  graph.addPhoneNumber(PHONE);
  graph.addPage({
    id: '200000000000001',
    token: 'EAAG-page-token',
    name: 'Acme Page',
    instagram_account_id: '17841400000000001',
  });
  graph.addProfile({ id: '6000000000000001', first_name: 'Ada', last_name: 'Lovelace' });
  client = new GraphClient({ baseUrl: graph.url, version: 'v23.0', timeoutMs: 2_000 });
});
afterEach(() => graph.reset());
afterAll(async () => {
  await client.close();
  await graph.stop();
});

async function graphError(p: Promise<unknown>): Promise<GraphError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(GraphError);
  return err as GraphError;
}

describe('fake Graph API', () => {
  it('answers the phone number object for its own token, with any vNN.N version', async () => {
    const other = new GraphClient({ baseUrl: graph.url, version: 'v19.0' });
    const got = await other.call('GET', PHONE.id, { token: PHONE.token });
    await other.close();
    expect(got).toMatchObject({
      id: PHONE.id,
      display_phone_number: PHONE.display_phone_number,
      verified_name: 'Acme',
      quality_rating: 'GREEN',
    });
    const req = graph.last(PHONE.id)!;
    expect(req.version).toBe('v19.0');
    expect(req.token).toBe(PHONE.token);
  });

  it('refuses an unknown token with 401 code 190, no token with 400, another asset with 100/33', async () => {
    const bad = await graphError(client.call('GET', PHONE.id, { token: 'nope' }));
    expect([bad.httpStatus, bad.code, bad.type]).toEqual([401, 190, 'OAuthException']);
    expect(classifyGraphError(bad)).toBe('final');

    const res = await fetch(`${graph.url}/v23.0/${PHONE.id}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ code: 104, type: 'OAuthException' });
    expect(typeof body.error.fbtrace_id).toBe('string');

    const foreign = await graphError(client.call('GET', PHONE.id, { token: 'EAAG-page-token' }));
    expect([foreign.httpStatus, foreign.code, foreign.subcode]).toEqual([400, 100, 33]);
  });

  it('sends WhatsApp messages with unique wamids and records the exact bytes', async () => {
    const json = {
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '15550100002',
      type: 'text',
      text: { body: 'hi', preview_url: false },
    };
    const a = await client.call<{ messages: Array<{ id: string }>; contacts: unknown }>(
      'POST',
      `${PHONE.id}/messages`,
      { token: PHONE.token, json },
    );
    const b = await client.call<{ messages: Array<{ id: string }> }>(
      'POST',
      `${PHONE.id}/messages`,
      { token: PHONE.token, json },
    );
    expect(a.contacts).toEqual([{ input: '15550100002', wa_id: '15550100002' }]);
    expect(a.messages[0]!.id).toMatch(/^wamid\./);
    expect(a.messages[0]!.id).not.toBe(b.messages[0]!.id);
    const req = graph.last({ method: 'POST', resource: `${PHONE.id}/messages` })!;
    expect(req.body.toString()).toBe(JSON.stringify(json));
    expect(req.headers['content-type']).toBe('application/json');
    expect(graph.sentMessages(PHONE.id)).toHaveLength(2);
  });

  it('answers code 100 for a malformed message', async () => {
    const err = await graphError(
      client.call('POST', `${PHONE.id}/messages`, {
        token: PHONE.token,
        json: { to: '1555', type: 'text', text: { body: 'x' } },
      }),
    );
    expect([err.httpStatus, err.code]).toEqual([400, 100]);
    expect(err.details).toMatch(/messaging_product/);
  });

  it('serves media metadata and the bytes behind the bearer token', async () => {
    const bytes = Buffer.from('\x89PNG fake image');
    graph.addMedia({ id: '1037543291543636', bytes, mimeType: 'image/png' });
    const meta = await client.call<{
      url: string;
      mime_type: string;
      file_size: number;
      sha256: string;
    }>('GET', '1037543291543636', { token: PHONE.token });
    expect(meta).toMatchObject({
      messaging_product: 'whatsapp',
      mime_type: 'image/png',
      file_size: bytes.length,
      id: '1037543291543636',
    });
    const got = await client.download(meta.url, { token: PHONE.token, maxBytes: 1024 });
    expect(got.bytes.equals(bytes)).toBe(true);
    expect(got.contentType).toBe('image/png');
    const refused = await graphError(client.download(meta.url, { token: 'nope', maxBytes: 1024 }));
    expect(refused.httpStatus).toBe(401);
  });

  it('creates templates as PENDING and lists them page by page with paging.next', async () => {
    for (let i = 0; i < 3; i++)
      graph.addTemplate({
        business_account_id: PHONE.business_account_id,
        name: `t${i}`,
        language: 'en_US',
        body: `Hello ${i}`,
      });
    const created = await client.call('POST', `${PHONE.business_account_id}/message_templates`, {
      token: PHONE.token,
      json: {
        name: 'order_ready',
        language: 'en',
        category: 'UTILITY',
        components: [{ type: 'BODY', text: 'Ready {{1}}', example: { body_text: [['A1']] } }],
      },
    });
    expect(created).toMatchObject({ status: 'PENDING', category: 'UTILITY' });
    const first = await client.call<{ data: Array<{ name: string }>; paging: { next?: string } }>(
      'GET',
      `${PHONE.business_account_id}/message_templates`,
      { token: PHONE.token, query: { limit: '3' } },
    );
    expect(first.data.map((t) => t.name)).toEqual(['t0', 't1', 't2']);
    expect(first.paging.next).toContain('after=');
    const rest = await fetch(first.paging.next!, {
      headers: { authorization: `Bearer ${PHONE.token}` },
    });
    const second = (await rest.json()) as {
      data: Array<{ name: string; status: string }>;
      paging: { next?: string };
    };
    expect(second.data).toEqual([
      expect.objectContaining({ name: 'order_ready', status: 'PENDING' }),
    ]);
    expect(second.paging.next).toBeUndefined();
  });

  it('answers pages, page messages and profiles', async () => {
    expect(
      await client.call('GET', '200000000000001', {
        token: 'EAAG-page-token',
        query: { fields: 'name,instagram_business_account' },
      }),
    ).toEqual({
      name: 'Acme Page',
      instagram_business_account: { id: '17841400000000001' },
      id: '200000000000001',
    });
    const sent = await client.call<{ recipient_id: string; message_id: string }>(
      'POST',
      '200000000000001/messages',
      {
        token: 'EAAG-page-token',
        json: {
          recipient: { id: '6000000000000001' },
          messaging_type: 'RESPONSE',
          message: { text: 'hi' },
        },
      },
    );
    expect(sent.recipient_id).toBe('6000000000000001');
    expect(sent.message_id).toMatch(/^m_/);
    expect(
      await client.call('GET', '6000000000000001', {
        token: 'EAAG-page-token',
        query: { fields: 'first_name,last_name' },
      }),
    ).toEqual({
      first_name: 'Ada',
      last_name: 'Lovelace',
      id: '6000000000000001',
    });
  });

  it('injects Meta errors for the next n matching requests, with headers', async () => {
    graph.failNext({ method: 'GET', resource: PHONE.id }, 2, {
      ...META_ERRORS.rateLimitHit,
      headers: { 'retry-after': '3' },
    });
    const e1 = await graphError(client.call('GET', PHONE.id, { token: PHONE.token }));
    expect([e1.httpStatus, e1.code, e1.retryAfterMs]).toEqual([400, 130429, 3000]);
    expect(classifyGraphError(e1)).toBe('throttled');
    await graphError(client.call('GET', PHONE.id, { token: PHONE.token }));
    await expect(client.call('GET', PHONE.id, { token: PHONE.token })).resolves.toMatchObject({
      id: PHONE.id,
    });
  });

  it('hangs matching requests so that client timeouts fire', async () => {
    const quick = new GraphClient({ baseUrl: graph.url, version: 'v23.0', timeoutMs: 150 });
    graph.hang(PHONE.id, 1);
    const err = await graphError(quick.call('GET', PHONE.id, { token: PHONE.token }));
    expect(err.httpStatus).toBe(0);
    expect(classifyGraphError(err)).toBe('transient');
    await quick.close();
  });

  it('delays answers', async () => {
    graph.delay(120);
    const t0 = Date.now();
    await client.call('GET', PHONE.id, { token: PHONE.token });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
  });

  it('posts webhooks signed over the exact bytes', async () => {
    let seen: { sig: string | undefined; raw: Buffer } | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen = {
          sig: req.headers['x-hub-signature-256'] as string | undefined,
          raw: Buffer.concat(chunks),
        };
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const res = await postWebhook(
      url,
      { object: 'whatsapp_business_account', entry: [] },
      { appSecret: 's3cret' },
    );
    expect(res.status).toBe(200);
    expect(seen!.sig).toBe(
      `sha256=${createHmac('sha256', 's3cret').update(seen!.raw).digest('hex')}`,
    );
    await new Promise<void>((r) => server.close(() => r()));
  });
});
