import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../src/channels/channel.js';
import { GraphClient } from '../../src/channels/meta/graph-client.js';
import { WhatsAppCloudProvider } from '../../src/channels/whatsapp/whatsapp-cloud.provider.js';
import { META_ERRORS, startFakeGraph, type FakeGraph } from '../fake-graph/server.js';

const PHONE = {
  id: '106540352242922',
  token: 'EAAG-test-access-token',
  display_phone_number: '+1 555-010-0001',
  verified_name: 'Acme Support',
  business_account_id: '102290129340398',
};
const SEND = { method: 'POST', resource: `${PHONE.id}/messages` };

let graph: FakeGraph;
let client: GraphClient;
let provider: WhatsAppCloudProvider;

beforeAll(async () => {
  graph = await startFakeGraph();
  graph.addPhoneNumber(PHONE);
  client = new GraphClient({ baseUrl: graph.url, version: 'v23.0', timeoutMs: 2_000 });
  provider = new WhatsAppCloudProvider({
    graph: client,
    phoneNumberId: PHONE.id,
    accessToken: PHONE.token,
  });
});
afterEach(() => graph.reset());
afterAll(async () => {
  await client.close();
  await graph.stop();
});

function message(over: Partial<OutboundMessage> = {}): OutboundMessage {
  return {
    accountId: 'acc_1',
    messageId: 'msg_1',
    channel: 'whatsapp',
    to: { contactId: 'ctc_1', phone: '+447700900123', identity: '447700900123' },
    type: 'text',
    content: 'Hello there',
    template: null,
    media: null,
    ...over,
  };
}

const signal = () => new AbortController().signal;

/** Sends, then returns the outcome and the one request the fake received. */
async function sendOne(m: OutboundMessage) {
  const outcome = await provider.send(m, signal());
  const requests = graph.find(SEND);
  expect(requests).toHaveLength(1);
  return { outcome, req: requests[0]! };
}

describe('WhatsApp Cloud provider: request bodies (DESIGN §4)', () => {
  it('text: to without +, preview_url false, bearer token, JSON content type', async () => {
    const { outcome, req } = await sendOne(message());
    expect(req.path).toBe(`/v23.0/${PHONE.id}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${PHONE.token}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body.toString('utf8')).toBe(
      '{"messaging_product":"whatsapp","recipient_type":"individual","to":"447700900123","type":"text","text":{"body":"Hello there","preview_url":false}}',
    );
    expect(outcome).toEqual({
      status: 'accepted',
      providerMessageId: expect.stringMatching(/^wamid\./),
    });
  });

  it('template with parameters: language.code and one body component of text parameters', async () => {
    const { req } = await sendOne(
      message({
        type: 'template',
        content: 'Order A1 is ready, Ada',
        template: { name: 'order_ready', language: 'en_US', params: ['A1', 'Ada'] },
      }),
    );
    expect(req.body.toString('utf8')).toBe(
      '{"messaging_product":"whatsapp","recipient_type":"individual","to":"447700900123","type":"template","template":{"name":"order_ready","language":{"code":"en_US"},"components":[{"type":"body","parameters":[{"type":"text","text":"A1"},{"type":"text","text":"Ada"}]}]}}',
    );
  });

  it('template without parameters has no components at all', async () => {
    const { req } = await sendOne(
      message({
        type: 'template',
        content: 'Hi',
        template: { name: 'hello', language: 'en', params: [] },
      }),
    );
    expect(req.json).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '447700900123',
      type: 'template',
      template: { name: 'hello', language: { code: 'en' } },
    });
  });

  it('image: link and caption; no caption key without content', async () => {
    const { req } = await sendOne(
      message({
        type: 'image',
        content: 'Look',
        media: { url: 'https://cdn.example/a.png', filename: null },
      }),
    );
    expect(req.body.toString('utf8')).toBe(
      '{"messaging_product":"whatsapp","recipient_type":"individual","to":"447700900123","type":"image","image":{"link":"https://cdn.example/a.png","caption":"Look"}}',
    );
    graph.reset();
    const bare = await sendOne(
      message({
        type: 'image',
        content: null,
        media: { url: 'https://cdn.example/a.png', filename: null },
      }),
    );
    expect((bare.req.json as { image: unknown }).image).toEqual({
      link: 'https://cdn.example/a.png',
    });
  });

  it('document: link, caption and filename when known', async () => {
    const { req } = await sendOne(
      message({
        type: 'document',
        content: 'Your invoice',
        media: { url: 'https://cdn.example/inv.pdf', filename: 'invoice-42.pdf' },
      }),
    );
    expect(req.body.toString('utf8')).toBe(
      '{"messaging_product":"whatsapp","recipient_type":"individual","to":"447700900123","type":"document","document":{"link":"https://cdn.example/inv.pdf","caption":"Your invoice","filename":"invoice-42.pdf"}}',
    );
    graph.reset();
    const bare = await sendOne(
      message({
        type: 'document',
        content: null,
        media: { url: 'https://cdn.example/inv.pdf', filename: null },
      }),
    );
    expect((bare.req.json as { document: unknown }).document).toEqual({
      link: 'https://cdn.example/inv.pdf',
    });
  });

  it('keeps non-ASCII text intact in UTF-8', async () => {
    const { req } = await sendOne(message({ content: 'Olá 👋 «ok»' }));
    expect((req.json as { text: { body: string } }).text.body).toBe('Olá 👋 «ok»');
    expect(req.body.toString('utf8')).toContain('"body":"Olá 👋 «ok»"');
  });

  it('each accepted message gets its own wamid', async () => {
    const a = await provider.send(message(), signal());
    const b = await provider.send(message({ messageId: 'msg_2' }), signal());
    expect(a.status).toBe('accepted');
    expect(b.status).toBe('accepted');
    if (a.status === 'accepted' && b.status === 'accepted')
      expect(a.providerMessageId).not.toBe(b.providerMessageId);
  });
});

describe('WhatsApp Cloud provider: messages it cannot send', () => {
  it('a contact without a phone fails with a clear reason and no request', async () => {
    const outcome = await provider.send(
      message({ to: { contactId: 'ctc_2', phone: null, identity: null } }),
      signal(),
    );
    expect(outcome).toEqual({ status: 'failed', reason: expect.stringMatching(/no phone number/) });
    expect(graph.requests).toHaveLength(0);
  });

  it('an image without media fails without a request', async () => {
    const outcome = await provider.send(message({ type: 'image', media: null }), signal());
    expect(outcome.status).toBe('failed');
    expect(graph.requests).toHaveLength(0);
  });
});

describe('WhatsApp Cloud provider: outcomes by Graph error code', () => {
  it('throttling (130429) with Retry-After is a retry after that delay', async () => {
    graph.failNext(SEND, 1, { ...META_ERRORS.rateLimitHit, headers: { 'retry-after': '7' } });
    const outcome = await provider.send(message(), signal());
    expect(outcome).toEqual({ status: 'retry', reason: '(#130429) Rate limit hit', afterMs: 7000 });
  });

  it.each([
    ['80007', META_ERRORS.rateLimitIssues],
    ['4', META_ERRORS.tooManyCalls],
    ['131056', META_ERRORS.pairRateLimit],
  ])(
    'throttling code %s without a hint is a retry on the back-off schedule',
    async (code, failure) => {
      graph.failNext(SEND, 1, failure);
      const outcome = await provider.send(message(), signal());
      expect(outcome).toEqual({ status: 'retry', reason: expect.stringContaining(`(#${code})`) });
      expect(outcome).not.toHaveProperty('afterMs');
    },
  );

  it.each([
    ['code 1', META_ERRORS.apiUnknown],
    ['code 2 (503)', META_ERRORS.apiService],
    ['HTTP 500 (131000)', META_ERRORS.somethingWentWrong],
  ])('transient %s is a retry', async (_name, failure) => {
    graph.failNext(SEND, 1, failure);
    expect((await provider.send(message(), signal())).status).toBe('retry');
  });

  it('a 5xx that is not Graph JSON is a retry', async () => {
    graph.failNext(SEND, 1, {
      status: 502,
      error: { code: 0 },
      rawBody: '<html>Bad Gateway</html>',
    });
    expect(await provider.send(message(), signal())).toEqual({
      status: 'retry',
      reason: 'Graph answered 502',
    });
  });

  it('no answer before the client timeout is a retry', async () => {
    const quick = new GraphClient({ baseUrl: graph.url, version: 'v23.0', timeoutMs: 150 });
    const p = new WhatsAppCloudProvider({
      graph: quick,
      phoneNumberId: PHONE.id,
      accessToken: PHONE.token,
    });
    graph.hang(SEND, 1);
    const outcome = await p.send(message(), signal());
    expect(outcome).toEqual({ status: 'retry', reason: 'Graph did not answer in time' });
    await quick.close();
  });

  it("the pipeline's abort signal ends the call as a retry", async () => {
    graph.hang(SEND, 1);
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(), 50);
    const t0 = Date.now();
    expect((await provider.send(message(), ctrl.signal)).status).toBe('retry');
    expect(Date.now() - t0).toBeLessThan(1_000);
  });

  it('final errors (131026, 100, 190) fail with the code and text as the reason', async () => {
    graph.failNext(SEND, 1, {
      status: 400,
      error: {
        code: 131026,
        message: 'Message undeliverable',
        error_data: { messaging_product: 'whatsapp', details: 'Message Undeliverable.' },
      },
    });
    expect(await provider.send(message(), signal())).toEqual({
      status: 'failed',
      reason: '(#131026) Message undeliverable: Message Undeliverable.',
    });

    graph.failNext(SEND, 1, META_ERRORS.expiredToken);
    expect(await provider.send(message(), signal())).toEqual({
      status: 'failed',
      reason: expect.stringMatching(/^\(#190\) /),
    });
  });

  it("Graph's own refusal of a bad body is final (code 100)", async () => {
    const outcome = await provider.send(
      message({ to: { contactId: 'c', phone: '+12', identity: '12' } }),
      signal(),
    );
    expect(outcome).toEqual({ status: 'failed', reason: expect.stringMatching(/^\(#100\) /) });
  });

  it('a token Graph does not know fails with 190, never throws', async () => {
    const p = new WhatsAppCloudProvider({
      graph: client,
      phoneNumberId: PHONE.id,
      accessToken: 'revoked',
    });
    const outcome = await p.send(message(), signal());
    expect(outcome).toEqual({ status: 'failed', reason: expect.stringMatching(/^\(#190\) /) });
    expect(graph.last(SEND)?.headers.authorization).toBe('Bearer revoked');
  });
});

describe('WhatsApp Cloud provider: a refused token', () => {
  it('is reported to tokenRefused with Graph’s words (190 and 102 only), and the send fails', async () => {
    const refused: string[] = [];
    const reporting = new WhatsAppCloudProvider({
      graph: client,
      phoneNumberId: PHONE.id,
      accessToken: PHONE.token,
      tokenRefused: async (reason) => {
        refused.push(reason);
      },
    });
    graph.failNext(SEND, 1, META_ERRORS.expiredToken);
    expect(await reporting.send(message(), signal())).toEqual({
      status: 'failed',
      reason: '(#190) Error validating access token: Session has expired',
    });
    graph.failNext(SEND, 1, META_ERRORS.undeliverable);
    graph.failNext(SEND, 1, META_ERRORS.rateLimitHit);
    await reporting.send(message(), signal());
    await reporting.send(message(), signal());
    expect(refused).toEqual(['(#190) Error validating access token: Session has expired']);
  });
});
