import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../src/channels/channel.js';
import { INBOUND_WAIT_DELAYS_MS } from '../../src/inbound/inbound.service.js';
import { PageMessagingProvider } from '../../src/channels/meta-pages/page-messaging.provider.js';
import { GraphClient } from '../../src/channels/meta/graph-client.js';
import { newAccount } from '../helpers.js';
import { fromPerson, mid, pageEvent, pageWebhook, scopedId } from '../fake-graph/page-webhooks.js';
import { META_ERRORS } from '../fake-graph/server.js';
import { postSignedWebhook } from '../fake-graph/webhooks.js';
import {
  connectPage,
  GRAPH_VERSION,
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

describe('Instagram provider: the Page’s Send API for the linked account', () => {
  const PAGE = {
    id: '105882224516789',
    token: 'EAAP-instagram-page-token',
    name: 'Acme',
    instagram_account_id: '17841405822304914',
  };
  const IGSID = '7185462391234567';
  const SEND = { method: 'POST', resource: `${PAGE.id}/messages` };
  const refusals: string[] = [];
  let provider: PageMessagingProvider;
  beforeAll(() => {
    h.graph.addPage(PAGE);
    provider = new PageMessagingProvider({
      graph: client,
      channel: 'instagram',
      pageId: PAGE.id,
      pageAccessToken: PAGE.token,
      tokenRefused: (reason) => {
        refusals.push(reason);
        return Promise.resolve();
      },
    });
  });
  beforeEach(() => {
    h.graph.reset();
    refusals.length = 0;
  });
  const message = (over: Partial<OutboundMessage> = {}): OutboundMessage => ({
    accountId: 'acc_1',
    messageId: 'msg_1',
    channel: 'instagram',
    to: { contactId: 'con_1', phone: null, identity: IGSID },
    type: 'text',
    content: 'Thanks for your message',
    template: null,
    media: null,
    ...over,
  });
  const send = (m: OutboundMessage) => provider.send(m, new AbortController().signal);
  const bodies = () => h.graph.find(SEND).map((r) => r.body.toString('utf8'));

  it('is named instagram and posts DESIGN’s bodies to /{page_id}/messages with the page token', async () => {
    expect(provider.name).toBe('instagram');
    const text = await send(message());
    await send(
      message({
        type: 'image',
        content: null,
        media: { url: 'https://cdn.example/i.jpg', filename: null },
      }),
    );
    await send(
      message({
        type: 'template',
        content: 'Your code is 1234',
        template: { name: 'otp', language: 'en', params: ['1234'] },
      }),
    );
    await send(
      message({
        type: 'document',
        content: null,
        media: { url: 'https://cdn.example/menu.pdf', filename: 'menu.pdf' },
      }),
    );
    expect(bodies()).toEqual([
      `{"recipient":{"id":"${IGSID}"},"messaging_type":"RESPONSE","message":{"text":"Thanks for your message"}}`,
      `{"recipient":{"id":"${IGSID}"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"image","payload":{"url":"https://cdn.example/i.jpg"}}}}`,
      `{"recipient":{"id":"${IGSID}"},"messaging_type":"RESPONSE","message":{"text":"Your code is 1234"}}`,
      `{"recipient":{"id":"${IGSID}"},"messaging_type":"RESPONSE","message":{"attachment":{"type":"file","payload":{"url":"https://cdn.example/menu.pdf"}}}}`,
    ]);
    for (const r of h.graph.find(SEND)) expect(r.token).toBe(PAGE.token);
    expect(text).toEqual({ status: 'accepted', providerMessageId: expect.any(String) });
  });

  it('a contact without an IGSID is failed with a reason; Graph is not called', async () => {
    expect(
      await send(message({ to: { contactId: 'con_1', phone: '+14155550100', identity: null } })),
    ).toEqual({
      status: 'failed',
      reason:
        'the contact has no Instagram id (IGSID) on this account: they must write to the business first',
    });
    expect(h.graph.find(SEND)).toHaveLength(0);
  });

  it('throttling is retried, a refused token fails and tells the connection', async () => {
    h.graph.failNext(SEND, 1, META_ERRORS.rateLimitIssues);
    expect((await send(message())).status).toBe('retry');
    h.graph.failNext(SEND, 1, META_ERRORS.expiredToken);
    expect((await send(message())).status).toBe('failed');
    expect(refusals).toHaveLength(1);
  });
});

describe('Instagram webhooks (object "instagram")', () => {
  let conn: PageConnection;
  beforeEach(async () => {
    const acc = await newAccount(h.t);
    conn = await connectPage(h, acc.accountId, 'instagram');
  });
  // entry.id and recipient.id are the Instagram professional account, not the Page.
  const ig = (...events: Record<string, unknown>[]) =>
    pageWebhook('instagram', conn.instagramAccountId!, ...events);
  const person = (
    profile: { name?: string; username?: string } = { name: 'Ada Lovelace', username: 'ada' },
  ) => {
    const id = scopedId();
    h.graph.addProfile({ id, ...profile });
    return id;
  };
  const account = () => conn.instagramAccountId!;

  it('a text message from an IGSID: inbound on instagram, the contact named from name (else username)', async () => {
    const named = person();
    const handle = person({ username: 'grace.h' });
    const id = mid();
    await deliverPage(
      h,
      conn,
      ig(
        fromPerson(named, account(), pageEvent.text('hi there', id)),
        fromPerson(handle, account(), pageEvent.text('hello')),
      ),
    );
    const messages = await inboundOf(h, conn.accountId);
    expect(
      messages.map((m) => [m.provider_message_id === id, m.channel, m.type, m.content]),
    ).toEqual([
      [true, 'instagram', 'text', 'hi there'],
      [false, 'instagram', 'text', 'hello'],
    ]);
    expect(await contactName(h, conn.accountId, messages[0]!.contact_id)).toBe('Ada Lovelace');
    expect(await contactName(h, conn.accountId, messages[1]!.contact_id)).toBe('grace.h');
    const lookup = profileLookups(h, named);
    expect(lookup).toHaveLength(1);
    expect(lookup[0]!.query).toEqual({ fields: 'name,username' });
    expect(lookup[0]!.token).toBe(conn.pageAccessToken);
  });

  it('looks each new sender up once, and takes each mid once', async () => {
    const igsid = person();
    const payload = ig(fromPerson(igsid, account(), pageEvent.text('one')));
    await deliverPage(h, conn, payload);
    await deliverPage(h, conn, payload);
    await deliverPage(h, conn, ig(fromPerson(igsid, account(), pageEvent.text('two'))));
    expect((await inboundOf(h, conn.accountId)).map((m) => m.content)).toEqual(['one', 'two']);
    expect(profileLookups(h, igsid)).toHaveLength(1);
  });

  it('takes entries naming the account or the Page (Meta’s newer examples: "id": "{PAGE_ID}"), nobody else’s', async () => {
    const igsid = person();
    const [byAccount, byPage] = [mid(), mid()];
    await deliverPage(
      h,
      conn,
      ig(fromPerson(igsid, account(), pageEvent.text('by account', byAccount))),
    );
    await deliverPage(
      h,
      conn,
      pageWebhook(
        'instagram',
        conn.pageId,
        fromPerson(igsid, conn.pageId, pageEvent.text('by page', byPage)),
      ),
    );
    await deliverPage(
      h,
      conn,
      pageWebhook(
        'instagram',
        '17841400000000000',
        fromPerson(igsid, '17841400000000000', pageEvent.text('another account')),
      ),
    );
    expect((await inboundOf(h, conn.accountId)).map((m) => m.provider_message_id)).toEqual([
      byAccount,
      byPage,
    ]);
  });

  it('ignores echoes of the account’s own messages (sent as the account or the Page), unsent messages, and object "page"', async () => {
    const igsid = person();
    for (const business of [account(), conn.pageId])
      await deliverPage(
        h,
        conn,
        pageWebhook('instagram', business, {
          sender: { id: business },
          recipient: { id: igsid },
          timestamp: Date.now(),
          ...pageEvent.echo('we said this'),
        }),
      );
    await deliverPage(h, conn, ig(fromPerson(igsid, account(), pageEvent.deleted(mid()))));
    await deliverPage(
      h,
      conn,
      pageWebhook('page', account(), fromPerson(igsid, account(), pageEvent.text('object page'))),
    );
    expect(await inboundOf(h, conn.accountId)).toEqual([]);
  });

  it('story replies, reactions and unsupported messages become text, never dropped', async () => {
    const igsid = person();
    const target = mid();
    await deliverPage(
      h,
      conn,
      ig(
        fromPerson(
          igsid,
          account(),
          pageEvent.storyReply(
            'Love this!',
            'https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=1',
          ),
          1_700_000_000_001,
        ),
        fromPerson(igsid, account(), pageEvent.reaction(target, '❤️'), 1_700_000_000_002),
        fromPerson(igsid, account(), pageEvent.unsupported(), 1_700_000_000_003),
      ),
    );
    expect((await inboundOf(h, conn.accountId)).map((m) => [m.type, m.content])).toEqual([
      [
        'text',
        '[Replied to your story: https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=1]\nLove this!',
      ],
      ['text', 'Reacted ❤️ to a message'],
      ['text', '[Unsupported Instagram message]'],
    ]);
  });

  it('attachments: image → image; story_mention, share, ig_reel, video → document, downloaded without a token', async () => {
    const igsid = person();
    const file = (type: string) =>
      h.graph.addPublicFile(`${randomBytes(6).toString('hex')}`, randomBytes(16), type);
    const kinds = ['image', 'story_mention', 'share', 'ig_reel', 'video'] as const;
    const ids = kinds.map(() => mid());
    await deliverPage(
      h,
      conn,
      ig(
        ...kinds.map((type, i) =>
          fromPerson(
            igsid,
            account(),
            pageEvent.attachments(
              [
                {
                  type,
                  payload: {
                    url: file(type === 'image' ? 'image/jpeg' : 'video/mp4'),
                    ...(type === 'ig_reel'
                      ? { title: 'Behind the scenes', reel_video_id: '1' }
                      : {}),
                  },
                },
              ],
              ids[i],
            ),
            1_700_000_000_000 + i,
          ),
        ),
      ),
    );
    const messages = await inboundOf(h, conn.accountId);
    expect(messages.map((m) => [m.provider_message_id, m.type, m.content])).toEqual([
      [ids[0], 'image', null],
      [ids[1], 'document', null],
      [ids[2], 'document', null],
      [ids[3], 'document', 'Behind the scenes'],
      [ids[4], 'document', null],
    ]);
    for (const m of messages) expect(m.media_url).toMatch(/\/v1\/media\/med_/);
    for (const d of h.graph.find((r) => r.resource.startsWith('files/')))
      expect(d.token).toBeNull();
  });

  it('a post share (Meta’s example: `share` and `ig_post` attachments) is one message, whether or not their URLs match', async () => {
    const igsid = person();
    const postUrl = h.graph.addPublicFile(
      `post-${randomBytes(4).toString('hex')}`,
      randomBytes(16),
      'image/jpeg',
    );
    const otherUrl = h.graph.addPublicFile(
      `post-${randomBytes(4).toString('hex')}`,
      randomBytes(16),
      'image/jpeg',
    );
    const title = 'Build a workspace that attracts talent and supports your team.';
    const share = (url: string) => ({
      type: 'share',
      payload: { ig_post_media_id: '18139494541428835', title, url },
    });
    const igPost = (url: string) => ({
      type: 'ig_post',
      payload: { ig_post_media_id: '18139494541428835', title, url },
    });
    const [same, differ] = [mid(), mid()];
    await deliverPage(
      h,
      conn,
      ig(
        fromPerson(
          igsid,
          account(),
          pageEvent.attachments([share(postUrl), igPost(postUrl)], same),
        ),
        fromPerson(
          igsid,
          account(),
          pageEvent.attachments([share(otherUrl), igPost(postUrl)], differ),
        ),
      ),
    );
    expect(
      (await inboundOf(h, conn.accountId)).map((m) => [m.provider_message_id, m.type, m.content]),
    ).toEqual([
      [same, 'document', title],
      [differ, 'document', title],
    ]);
  });

  it('read.mid marks that message and every earlier one of the conversation read, no later one', async () => {
    const igsid = person();
    const t0 = Date.now() - 60_000;
    const mids = [mid(), mid(), mid()];
    const { ids } = await pageConversation(h, conn, igsid, [
      { providerMessageId: mids[0]!, at: new Date(t0) },
      { providerMessageId: mids[1]!, at: new Date(t0 + 1_000) },
      { providerMessageId: mids[2]!, at: new Date(t0 + 2_000) },
    ]);
    await deliverPage(h, conn, ig(fromPerson(igsid, account(), pageEvent.readMid(mids[1]!))));
    expect(await Promise.all(ids.map((id) => statusOf(h, conn.accountId, id)))).toEqual([
      'read',
      'read',
      'sent',
    ]);
  });

  it('a read naming a mid not recorded yet waits for it', async () => {
    const igsid = person();
    const late = mid();
    await pageConversation(h, conn, igsid, []);
    await deliverPage(h, conn, ig(fromPerson(igsid, account(), pageEvent.readMid(late))));
    const { ids } = await pageConversation(h, conn, igsid, [
      { providerMessageId: late, at: new Date() },
    ]);
    h.t.clock.advance(INBOUND_WAIT_DELAYS_MS[0]!);
    await h.drain(conn.accountId);
    expect(await statusOf(h, conn.accountId, ids[0]!)).toBe('read');
  });

  it('a bad signature is a 401 (the connection’s app secret)', async () => {
    const res = await postSignedWebhook(
      conn.webhookUrl,
      ig(fromPerson(person(), account(), pageEvent.text('x'))),
      'not the app secret',
    );
    expect(res.status).toBe(401);
  });
});
