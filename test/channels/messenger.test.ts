import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../src/channels/channel.js';
import {
  INBOUND_WAIT_DELAYS_MS,
  UNKNOWN_REPORT_WAITS,
  PROFILE_RETRY_DELAYS_MS,
} from '../../src/inbound/inbound.service.js';
import { PageMessagingProvider } from '../../src/channels/meta-pages/page-messaging.provider.js';
import { SandboxProvider } from '../../src/channels/sandbox/sandbox.provider.js';
import { WhatsAppCloudProvider } from '../../src/channels/whatsapp/whatsapp-cloud.provider.js';
import { GraphClient } from '../../src/channels/meta/graph-client.js';
import { newAccount, type TestAccount } from '../helpers.js';
import { fromPerson, mid, pageEvent, pageWebhook, scopedId } from '../fake-graph/page-webhooks.js';
import { META_ERRORS } from '../fake-graph/server.js';
import { postSignedWebhook } from '../fake-graph/webhooks.js';
import {
  connectPage,
  GRAPH_VERSION,
  PUBLIC_URL,
  startInboundHarness,
  type InboundHarness,
  type PageConnection,
} from './inbound-harness.js';
import {
  contactName,
  deliverPage,
  inboundOf,
  pageConversation,
  profileLookups,
  statusOf,
} from './page-helpers.js';

let h: InboundHarness;
let client: GraphClient;
beforeAll(async () => {
  h = await startInboundHarness();
  client = new GraphClient({ baseUrl: h.graph.url, version: GRAPH_VERSION, timeoutMs: 2_000 });
});
afterAll(async () => {
  await client.close();
  await h.close();
});

describe('Messenger provider: Send API requests (DESIGN §4 "Sending")', () => {
  const PAGE = { id: '104763942387123', token: 'EAAP-messenger-page-token', name: 'Acme' };
  const PSID = '6203918263011234';
  const refusals: string[] = [];
  const captions: Array<{ sent: [string, string] } | { failed: [string, string] }> = [];
  let provider: PageMessagingProvider;
  beforeAll(() => {
    h.graph.addPage(PAGE);
    provider = new PageMessagingProvider({
      graph: client,
      channel: 'messenger',
      pageId: PAGE.id,
      pageAccessToken: PAGE.token,
      tokenRefused: (reason) => {
        refusals.push(reason);
        return Promise.resolve();
      },
      captionSent: (attachment, caption) => {
        captions.push({ sent: [attachment, caption] });
        return Promise.resolve();
      },
      captionFailed: (attachment, reason) => void captions.push({ failed: [attachment, reason] }),
    });
  });
  beforeEach(() => {
    h.graph.reset();
    refusals.length = 0;
    captions.length = 0;
  });

  const SEND = { method: 'POST', resource: `${PAGE.id}/messages` };
  const message = (over: Partial<OutboundMessage> = {}): OutboundMessage => ({
    accountId: 'acc_1',
    messageId: 'msg_1',
    channel: 'messenger',
    to: { contactId: 'con_1', phone: null, identity: PSID },
    type: 'text',
    content: 'Your order has shipped',
    template: null,
    media: null,
    ...over,
  });
  const send = (m: OutboundMessage) => provider.send(m, new AbortController().signal);
  const bodies = () => h.graph.find(SEND).map((r) => r.body.toString('utf8'));

  it('text: POST /{version}/{page_id}/messages with the page token, exactly DESIGN’s body', async () => {
    const outcome = await send(message());
    const [req] = h.graph.find(SEND);
    expect(req!.path).toBe(`/v23.0/${PAGE.id}/messages`);
    expect(req!.headers.authorization).toBe(`Bearer ${PAGE.token}`);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(bodies()).toEqual([
      `{"recipient":{"id":"${PSID}"},"messaging_type":"RESPONSE","message":{"text":"Your order has shipped"}}`,
    ]);
    expect(outcome).toEqual({
      status: 'accepted',
      providerMessageId: expect.stringMatching(/^m_/),
    });
  });

  it('a template goes as its rendered text (Meta has no templates on Messenger)', async () => {
    await send(
      message({
        type: 'template',
        content: 'Hi Ada, order A1 is ready',
        template: { name: 'order_ready', language: 'en', params: ['Ada', 'A1'] },
      }),
    );
    expect(bodies()).toEqual([
      `{"recipient":{"id":"${PSID}"},"messaging_type":"RESPONSE","message":{"text":"Hi Ada, order A1 is ready"}}`,
    ]);
  });

  it('image: an image attachment by URL; no caption, one request', async () => {
    const outcome = await send(
      message({
        type: 'image',
        content: null,
        media: { url: 'https://cdn.example/p.png', filename: null },
      }),
    );
    expect(bodies()).toEqual([
      `{"recipient":{"id":"${PSID}"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"image","payload":{"url":"https://cdn.example/p.png"}}}}`,
    ]);
    expect(outcome.status).toBe('accepted');
  });

  it('document: a file attachment, then its caption as a second text message; the attachment names the message', async () => {
    const outcome = await send(
      message({
        type: 'document',
        content: 'Your invoice',
        media: { url: 'https://cdn.example/invoice.pdf', filename: 'invoice.pdf' },
      }),
    );
    expect(bodies()).toEqual([
      `{"recipient":{"id":"${PSID}"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"file","payload":{"url":"https://cdn.example/invoice.pdf"}}}}`,
      `{"recipient":{"id":"${PSID}"},"messaging_type":"RESPONSE","message":{"text":"Your invoice"}}`,
    ]);
    const first = h.graph.find(SEND)[0]!;
    expect(outcome).toEqual({ status: 'accepted', providerMessageId: expect.any(String) });
    // The fake answers the recipient and a fresh message id; the first one is ours, the
    // caption's is told as another name of the message.
    expect(first.json).toMatchObject({ message: { attachment: { type: 'file' } } });
    const id = outcome.status === 'accepted' ? outcome.providerMessageId : '';
    expect(captions).toEqual([{ sent: [id, expect.stringMatching(/^m_/)] }]);
    expect((captions[0] as { sent: [string, string] }).sent[1]).not.toBe(id);
  });

  it('a caption Meta refuses does not fail the message whose attachment went out', async () => {
    h.graph.failNext(
      (r) => r.resource === `${PAGE.id}/messages` && JSON.stringify(r.json).includes('"text"'),
      1,
      META_ERRORS.invalidParameter,
    );
    const outcome = await send(
      message({
        type: 'image',
        content: 'Look',
        media: { url: 'https://cdn.example/p.png', filename: null },
      }),
    );
    expect(outcome.status).toBe('accepted');
    expect(h.graph.find(SEND)).toHaveLength(2);
    // Told, to be logged: the caption is lost, not silently.
    const id = outcome.status === 'accepted' ? outcome.providerMessageId : '';
    expect(captions).toEqual([{ failed: [id, '(#100) Invalid parameter'] }]);
  });

  it('a contact without a PSID on the page is failed with a reason, and Graph is not called', async () => {
    const outcome = await send(
      message({ to: { contactId: 'con_1', phone: '+14155550100', identity: null } }),
    );
    expect(outcome).toEqual({
      status: 'failed',
      reason:
        'the contact has no Messenger id (PSID) on this page: they must write to the business first',
    });
    expect(h.graph.find(SEND)).toHaveLength(0);
  });

  it('Graph errors by code: throttling and 5xx retried (with Retry-After), the rest final', async () => {
    h.graph.failNext(SEND, 1, { ...META_ERRORS.tooManyCalls, headers: { 'retry-after': '7' } });
    expect(await send(message())).toEqual({
      status: 'retry',
      reason: '(#4) Application request limit reached',
      afterMs: 7_000,
    });
    h.graph.failNext(SEND, 1, META_ERRORS.apiService);
    expect((await send(message())).status).toBe('retry');
    h.graph.failNext(SEND, 1, {
      status: 400,
      error: {
        code: 551,
        type: 'OAuthException',
        message: 'This person isn’t available right now.',
      },
    });
    expect(await send(message())).toEqual({
      status: 'failed',
      reason: '(#551) This person isn’t available right now.',
    });
    expect(refusals).toEqual([]);
  });

  it('a refused page token fails the message and tells the connection', async () => {
    h.graph.failNext(SEND, 1, META_ERRORS.expiredToken);
    const outcome = await send(message());
    expect(outcome).toEqual({
      status: 'failed',
      reason: '(#190) Error validating access token: Session has expired',
    });
    expect(refusals).toEqual(['(#190) Error validating access token: Session has expired']);
  });

  it('the window: templates bypass it on WhatsApp and the sandbox, not on Messenger or Instagram', () => {
    const page = (channel: 'messenger' | 'instagram') =>
      new PageMessagingProvider({ graph: client, channel, pageId: 'p', pageAccessToken: 't' });
    const whatsapp = new WhatsAppCloudProvider({
      graph: client,
      phoneNumberId: 'n',
      accessToken: 't',
    });
    const sandbox = new SandboxProvider({
      autoAdvance: false,
      deliveredAfterMs: 0,
      readAfterMs: 0,
    });
    expect(whatsapp.templatesBypassWindow).toBe(true);
    expect(sandbox.templatesBypassWindow).toBe(true);
    expect(page('messenger').templatesBypassWindow).toBe(false);
    expect(page('instagram').templatesBypassWindow).toBe(false);
  });
});

describe('Messenger webhooks (object "page")', () => {
  let acc: TestAccount;
  let conn: PageConnection;
  beforeEach(async () => {
    acc = await newAccount(h.t);
    conn = await connectPage(h, acc.accountId, 'messenger');
  });
  const page = (...events: Record<string, unknown>[]) =>
    pageWebhook('page', conn.entryId, ...events);
  const person = (over: { first_name?: string; last_name?: string } = {}) => {
    const id = scopedId();
    h.graph.addProfile({ id, first_name: 'Ada', last_name: 'Lovelace', ...over });
    return id;
  };

  it('answers the verification handshake with the connection’s verify token', async () => {
    const res = await h.app.inject({
      method: 'GET',
      url: `/channels/${conn.id}/webhook`,
      query: {
        'hub.mode': 'subscribe',
        'hub.verify_token': conn.verifyToken,
        'hub.challenge': '42',
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('42');
  });

  it('a bad signature is a 401 and nothing is stored', async () => {
    const psid = person();
    const payload = page(fromPerson(psid, conn.pageId, pageEvent.text('hi')));
    for (const signature of [null, 'sha256=00', undefined]) {
      const secret = signature === undefined ? 'another app secret' : conn.appSecret;
      const res = await postSignedWebhook(conn.webhookUrl, payload, secret, {
        ...(signature === undefined ? {} : { signature }),
      });
      expect(res.status).toBe(401);
    }
    const stored = await h.t.db
      .selectFrom('inbound_webhooks')
      .select('id')
      .where('account_id', '=', conn.accountId)
      .execute();
    expect(stored).toEqual([]);
  });

  it('a text message: inbound on messenger by its mid, the sender a contact named from their profile', async () => {
    const psid = person();
    const id = mid();
    await deliverPage(
      h,
      conn,
      page(fromPerson(psid, conn.pageId, pageEvent.text('hello, world!', id))),
    );
    const [m, ...rest] = await inboundOf(h, conn.accountId);
    expect(rest).toEqual([]);
    expect(m).toMatchObject({
      provider_message_id: id,
      type: 'text',
      content: 'hello, world!',
      channel: 'messenger',
    });
    expect(h.testSink.contactOf(conn.accountId, 'messenger', psid)).toBe(m!.contact_id);
    expect(await contactName(h, conn.accountId, m!.contact_id)).toBe('Ada Lovelace');
    const lookups = profileLookups(h, psid);
    expect(lookups).toHaveLength(1);
    expect(lookups[0]!.query).toEqual({ fields: 'first_name,last_name' });
    expect(lookups[0]!.token).toBe(conn.pageAccessToken);
  });

  it('looks a sender’s name up once: several first messages together, then later ones', async () => {
    const psid = person();
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(psid, conn.pageId, pageEvent.text('one')),
        fromPerson(psid, conn.pageId, pageEvent.text('two')),
      ),
    );
    await deliverPage(h, conn, page(fromPerson(psid, conn.pageId, pageEvent.text('three'))));
    const messages = await inboundOf(h, conn.accountId);
    expect(messages.map((m) => m.content)).toEqual(['one', 'two', 'three']);
    expect(new Set(messages.map((m) => m.contact_id)).size).toBe(1);
    expect(profileLookups(h, psid)).toHaveLength(1);
  });

  it('does not look up a sender the account already knows by that PSID', async () => {
    const psid = person();
    await pageConversation(h, conn, psid, []);
    await deliverPage(h, conn, page(fromPerson(psid, conn.pageId, pageEvent.text('back again'))));
    expect(profileLookups(h, psid)).toHaveLength(0);
    const [m] = await inboundOf(h, conn.accountId);
    expect(await contactName(h, conn.accountId, m!.contact_id)).toBe('Known');
  });

  it('a throttled profile lookup holds nothing back: the message is recorded unnamed at once, the name arrives from a later job', async () => {
    const later = person({ first_name: 'Grace', last_name: 'Hopper' });
    h.graph.failNext({ method: 'GET', resource: later }, 1, META_ERRORS.tooManyCalls);
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(later, conn.pageId, pageEvent.text('first')),
        fromPerson(later, conn.pageId, pageEvent.text('then')),
      ),
    );
    // Recorded at once, in order, without a name; one lookup so far.
    const recorded = await inboundOf(h, conn.accountId);
    expect(recorded.map((m) => m.content)).toEqual(['first', 'then']);
    const contactId = recorded[0]!.contact_id;
    expect(recorded[1]!.contact_id).toBe(contactId);
    expect(await contactName(h, conn.accountId, contactId)).toBeNull();
    expect(profileLookups(h, later)).toHaveLength(1);
    const webhook = await h.t.db
      .selectFrom('inbound_webhooks')
      .select('processed_at')
      .where('account_id', '=', conn.accountId)
      .executeTakeFirstOrThrow();
    expect(webhook.processed_at).not.toBeNull();

    // The profile job, once due, names the contact: one more lookup, the last.
    h.t.clock.advance(PROFILE_RETRY_DELAYS_MS[0]!);
    await h.drain(conn.accountId);
    expect(await contactName(h, conn.accountId, contactId)).toBe('Grace Hopper');
    expect(profileLookups(h, later)).toHaveLength(2);
    await deliverPage(h, conn, page(fromPerson(later, conn.pageId, pageEvent.text('again'))));
    expect(profileLookups(h, later)).toHaveLength(2);
  });

  it('a profile job retries while Graph fails for a passing reason, never renames a contact named meanwhile, and gives up on a final refusal', async () => {
    const flaky = person({ first_name: 'Alan', last_name: 'Turing' });
    h.graph.failNext({ method: 'GET', resource: flaky }, 2, META_ERRORS.apiService);
    await deliverPage(h, conn, page(fromPerson(flaky, conn.pageId, pageEvent.text('hi'))));
    const [m] = await inboundOf(h, conn.accountId);
    expect(await contactName(h, conn.accountId, m!.contact_id)).toBeNull();
    h.t.clock.advance(PROFILE_RETRY_DELAYS_MS[0]!);
    await h.drain(conn.accountId);
    // The job's first attempt failed too: still unnamed, due again after the next delay.
    expect(profileLookups(h, flaky)).toHaveLength(2);
    expect(await contactName(h, conn.accountId, m!.contact_id)).toBeNull();
    await h.t.db
      .updateTable('contacts')
      .set({ name: 'Named by a person' })
      .where('account_id', '=', conn.accountId)
      .where('id', '=', m!.contact_id)
      .execute();
    h.t.clock.advance(PROFILE_RETRY_DELAYS_MS[1]!);
    await h.drain(conn.accountId);
    expect(profileLookups(h, flaky)).toHaveLength(3);
    expect(await contactName(h, conn.accountId, m!.contact_id)).toBe('Named by a person');

    const refused = person();
    h.graph.failNext({ method: 'GET', resource: refused }, 1, META_ERRORS.invalidParameter);
    await deliverPage(h, conn, page(fromPerson(refused, conn.pageId, pageEvent.text('second'))));
    const unnamed = (await inboundOf(h, conn.accountId)).find((x) => x.content === 'second')!;
    expect(await contactName(h, conn.accountId, unnamed.contact_id)).toBeNull();
    h.t.clock.advance(PROFILE_RETRY_DELAYS_MS[0]!);
    await h.drain(conn.accountId);
    // Refused for good: no job, no second lookup.
    expect(profileLookups(h, refused)).toHaveLength(1);
    const jobs = await h.t.db
      .selectFrom('jobs')
      .select('kind')
      .where('account_id', '=', conn.accountId)
      .execute();
    expect(jobs).toEqual([]);
  });

  it('keeps a new sender’s webhooks in order while their profile cannot be read', async () => {
    const psid = person({ first_name: 'Ada', last_name: 'Byron' });
    h.graph.failNext({ method: 'GET', resource: psid }, 1, META_ERRORS.rateLimitIssues);
    const [one, two] = [mid(), mid()];
    await postSignedWebhook(
      conn.webhookUrl,
      page(fromPerson(psid, conn.pageId, pageEvent.text('one', one))),
      conn.appSecret,
    );
    await h.drain(conn.accountId);
    h.t.clock.advance(1_000);
    await deliverPage(h, conn, page(fromPerson(psid, conn.pageId, pageEvent.text('two', two))));
    const recorded = await inboundOf(h, conn.accountId);
    expect(recorded.map((m) => m.provider_message_id)).toEqual([one, two]);
    // One lookup (throttled): the second webhook did not look the new sender up again.
    expect(profileLookups(h, psid)).toHaveLength(1);
    h.t.clock.advance(PROFILE_RETRY_DELAYS_MS[0]!);
    await h.drain(conn.accountId);
    expect(await contactName(h, conn.accountId, recorded[0]!.contact_id)).toBe('Ada Byron');
  });

  it('a fallback attachment without payload and a template attachment (Meta’s examples) are kept as readable text', async () => {
    const psid = person();
    const [fallback, template] = [mid(), mid()];
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([{ type: 'fallback' } as never], fallback),
        ),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments(
            [
              {
                type: 'template',
                payload: {
                  template_type: 'generic',
                  elements: [{ title: 'Blue shirt', subtitle: 'Size M' }],
                },
              },
            ],
            template,
          ),
        ),
      ),
    );
    expect(
      (await inboundOf(h, conn.accountId)).map((m) => [m.provider_message_id, m.type, m.content]),
    ).toEqual([
      [fallback, 'text', '[Messenger fallback without content]'],
      [template, 'text', '[Messenger template without content]'],
    ]);
  });

  it('takes each mid once however often Meta sends it', async () => {
    const psid = person();
    const payload = page(fromPerson(psid, conn.pageId, pageEvent.text('once')));
    await deliverPage(h, conn, payload);
    await deliverPage(h, conn, payload);
    expect(await inboundOf(h, conn.accountId)).toHaveLength(1);
  });

  it('ignores echoes of the page’s own messages and entries of another page', async () => {
    const psid = person();
    await deliverPage(
      h,
      conn,
      pageWebhook('page', conn.pageId, {
        sender: { id: conn.pageId },
        recipient: { id: psid },
        timestamp: Date.now(),
        ...pageEvent.echo('we said this'),
      }),
    );
    await deliverPage(h, conn, page(fromPerson(psid, conn.pageId, pageEvent.echo('echo'))));
    await deliverPage(
      h,
      conn,
      pageWebhook('page', '999999999', fromPerson(psid, '999999999', pageEvent.text('not ours'))),
    );
    await deliverPage(
      h,
      conn,
      pageWebhook(
        'instagram',
        conn.pageId,
        fromPerson(psid, conn.pageId, pageEvent.text('wrong object')),
      ),
    );
    expect(await inboundOf(h, conn.accountId)).toEqual([]);
  });

  it('attachments: image → image, video/audio/file → document, kept and served at /v1/media/{id}', async () => {
    const psid = person();
    const png = randomBytes(64);
    const mp4 = randomBytes(80);
    const url = (name: string, bytes: Buffer, type: string) =>
      h.graph.addPublicFile(`${randomBytes(6).toString('hex')}-${name}`, bytes, type);
    const imageUrl = url('p.png', png, 'image/png');
    const videoUrl = url('v.mp4', mp4, 'video/mp4');
    const audioUrl = url('a.mp4', randomBytes(10), 'audio/mp4');
    const fileUrl = url('f.pdf', randomBytes(10), 'application/pdf');
    const ids = [mid(), mid(), mid(), mid()];
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([{ type: 'image', payload: { url: imageUrl } }], ids[0]),
        ),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([{ type: 'video', payload: { url: videoUrl } }], ids[1]),
        ),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([{ type: 'audio', payload: { url: audioUrl } }], ids[2]),
        ),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([{ type: 'file', payload: { url: fileUrl } }], ids[3]),
        ),
      ),
    );
    const messages = await inboundOf(h, conn.accountId);
    expect(messages.map((m) => [m.provider_message_id, m.type])).toEqual([
      [ids[0], 'image'],
      [ids[1], 'document'],
      [ids[2], 'document'],
      [ids[3], 'document'],
    ]);
    for (const m of messages)
      expect(m.media_url).toMatch(new RegExp(`^${PUBLIC_URL}/v1/media/med_`));
    // No token travels to an attachment URL.
    const downloads = h.graph.find((r) => r.resource.startsWith('files/'));
    expect(downloads).toHaveLength(4);
    for (const d of downloads) expect(d.token).toBeNull();

    const served = await h.app.inject({
      method: 'GET',
      url: new URL(messages[1]!.media_url!).pathname,
      headers: { authorization: `Bearer ${acc.apiKey}` },
    });
    expect(served.statusCode).toBe(200);
    expect(served.headers['content-type']).toBe('video/mp4');
    expect(Buffer.compare(served.rawPayload, mp4)).toBe(0);
  });

  it('several attachments in one message: the first by its mid (with the text), the rest by {mid}#n; a sticker sent twice is kept once', async () => {
    const psid = person();
    const a = h.graph.addPublicFile(
      `${randomBytes(6).toString('hex')}.png`,
      randomBytes(8),
      'image/png',
    );
    const b = h.graph.addPublicFile(
      `${randomBytes(6).toString('hex')}.png`,
      randomBytes(8),
      'image/png',
    );
    const sticker = h.graph.addPublicFile(
      `${randomBytes(6).toString('hex')}.webp`,
      randomBytes(8),
      'image/webp',
    );
    const id = mid();
    const stickerId = mid();
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments(
            [
              { type: 'image', payload: { url: a } },
              { type: 'image', payload: { url: b } },
            ],
            id,
            'two photos',
          ),
        ),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments(
            [
              { type: 'sticker', payload: { url: sticker, sticker_id: 369239263222822 } },
              { type: 'image', payload: { url: sticker, sticker_id: 369239263222822 } },
            ],
            stickerId,
          ),
        ),
      ),
    );
    const messages = await inboundOf(h, conn.accountId);
    expect(messages.map((m) => [m.provider_message_id, m.type, m.content])).toEqual([
      [id, 'image', 'two photos'],
      [`${id}#1`, 'image', null],
      [stickerId, 'document', null],
    ]);
  });

  it('kinds with no file are readable text: a shared link, a location, a quick reply, a reaction, a postback', async () => {
    const psid = person();
    const target = mid();
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([
            {
              type: 'fallback',
              payload: { title: 'Spring sale', url: 'https://shop.example/sale' },
            },
          ]),
          1_700_000_000_001,
        ),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments([
            { type: 'location', payload: { coordinates: { lat: 51.5, long: -0.12 } } },
          ]),
          1_700_000_000_002,
        ),
        fromPerson(psid, conn.pageId, pageEvent.quickReply('Red', 'COLOR_RED'), 1_700_000_000_003),
        fromPerson(psid, conn.pageId, pageEvent.reaction(target, '❤️'), 1_700_000_000_004),
        fromPerson(psid, conn.pageId, pageEvent.reaction(target, '', 'unreact'), 1_700_000_000_005),
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.postback('Get Started', 'START'),
          1_700_000_000_006,
        ),
      ),
    );
    const messages = await inboundOf(h, conn.accountId);
    expect(messages.map((m) => [m.type, m.content])).toEqual([
      ['text', 'Shared link: Spring sale https://shop.example/sale'],
      ['text', 'Location: 51.5, -0.12'],
      ['text', 'Red'],
      ['text', 'Reacted ❤️ to a message'],
      ['text', 'Removed a reaction'],
      ['text', 'Get Started'],
    ]);
  });

  it('an attachment that cannot be downloaded any more is recorded as text that says so', async () => {
    const psid = person();
    const id = mid();
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(
          psid,
          conn.pageId,
          pageEvent.attachments(
            [{ type: 'video', payload: { url: `${h.graph.url}/files/gone.mp4` } }],
            id,
          ),
        ),
      ),
    );
    const [m] = await inboundOf(h, conn.accountId);
    expect(m).toMatchObject({ provider_message_id: id, type: 'text', media_url: null });
    expect(m!.content).toMatch(/^\[video not available: /);
  });

  it('delivery.mids mark those messages delivered; a delivery without mids goes by its watermark', async () => {
    const psid = person();
    const t0 = Date.now() - 60_000;
    const mids = [mid(), mid(), mid()];
    const { ids } = await pageConversation(h, conn, psid, [
      { providerMessageId: mids[0]!, at: new Date(t0) },
      { providerMessageId: mids[1]!, at: new Date(t0 + 1_000) },
      { providerMessageId: mids[2]!, at: new Date(t0 + 2_000) },
    ]);
    await deliverPage(
      h,
      conn,
      page(fromPerson(psid, conn.pageId, pageEvent.delivery([mids[1]!], t0 + 5_000))),
    );
    expect(await Promise.all(ids.map((id) => statusOf(h, conn.accountId, id)))).toEqual([
      'sent',
      'delivered',
      'sent',
    ]);
    await deliverPage(
      h,
      conn,
      page(fromPerson(psid, conn.pageId, pageEvent.delivery(undefined, t0 + 1_000))),
    );
    expect(await Promise.all(ids.map((id) => statusOf(h, conn.accountId, id)))).toEqual([
      'delivered',
      'delivered',
      'sent',
    ]);
  });

  it('read.watermark marks every outbound message of that conversation sent up to it read, and no later one', async () => {
    const psid = person();
    const other = person();
    const t0 = Date.now() - 60_000;
    const { ids } = await pageConversation(h, conn, psid, [
      { providerMessageId: mid(), at: new Date(t0), status: 'delivered' },
      { providerMessageId: mid(), at: new Date(t0 + 1_000) },
      { providerMessageId: mid(), at: new Date(t0 + 2_000) },
    ]);
    const { ids: theirs } = await pageConversation(h, conn, other, [
      { providerMessageId: mid(), at: new Date(t0) },
    ]);
    await deliverPage(
      h,
      conn,
      page(fromPerson(psid, conn.pageId, pageEvent.readWatermark(t0 + 1_000))),
    );
    expect(await Promise.all(ids.map((id) => statusOf(h, conn.accountId, id)))).toEqual([
      'read',
      'read',
      'sent',
    ]);
    expect(await statusOf(h, conn.accountId, theirs[0]!)).toBe('sent');
    const events = await h.t.db
      .selectFrom('events')
      .select('type')
      .where('account_id', '=', conn.accountId)
      .where('type', '=', 'message.read')
      .execute();
    expect(events).toHaveLength(2);
  });

  it('a delivery for a mid not recorded yet waits for it', async () => {
    const psid = person();
    const late = mid();
    await deliverPage(
      h,
      conn,
      page(fromPerson(psid, conn.pageId, pageEvent.delivery([late], Date.now()))),
    );
    const { ids } = await pageConversation(h, conn, psid, [
      { providerMessageId: late, at: new Date() },
    ]);
    h.t.clock.advance(INBOUND_WAIT_DELAYS_MS[0]!);
    await h.drain(conn.accountId);
    expect(await statusOf(h, conn.accountId, ids[0]!)).toBe('delivered');
  });

  it('a delivery or read naming a mid we never sent (a reply from the Page inbox) waits seconds, not minutes, and holds up nothing else', async () => {
    const psid = person();
    const known = mid();
    const { ids } = await pageConversation(h, conn, psid, [
      { providerMessageId: known, at: new Date(Date.now() - 60_000) },
    ]);
    const [foreign, foreignRead, text] = [mid(), mid(), mid()];
    await deliverPage(
      h,
      conn,
      page(
        fromPerson(psid, conn.pageId, pageEvent.delivery([foreign, known], Date.now())),
        fromPerson(psid, conn.pageId, pageEvent.readMid(foreignRead)),
        fromPerson(psid, conn.pageId, pageEvent.text('thanks!', text)),
      ),
    );
    // Everything we know of took effect at once.
    expect(await statusOf(h, conn.accountId, ids[0]!)).toBe('delivered');
    expect((await inboundOf(h, conn.accountId)).map((m) => m.provider_message_id)).toEqual([text]);
    const pending = () =>
      h.t.db
        .selectFrom('inbound_webhooks')
        .select('processed_at')
        .where('account_id', '=', conn.accountId)
        .executeTakeFirstOrThrow();
    expect((await pending()).processed_at).toBeNull();
    // Short waits (a send of ours may still be recording its id), then dropped: time moves a
    // second at a time, and the report is done with once 15 s have passed at the latest.
    let waited = 0;
    while ((await pending()).processed_at === null && waited < 15_000) {
      h.t.clock.advance(1_000);
      waited += 1_000;
      await h.drain(conn.accountId);
    }
    expect((await pending()).processed_at).not.toBeNull();
    // It did wait, for the short waits and no more.
    const shortWaits = INBOUND_WAIT_DELAYS_MS.slice(0, UNKNOWN_REPORT_WAITS);
    expect(waited).toBe(shortWaits.reduce((sum, delay) => sum + delay, 0));
    const jobs = await h.t.db
      .selectFrom('jobs')
      .select('kind')
      .where('account_id', '=', conn.accountId)
      .execute();
    expect(jobs).toEqual([]);
  });
});
