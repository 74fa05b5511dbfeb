import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { META_ERRORS } from '../fake-graph/server.js';
import { randomPhone } from '../helpers.js';
import {
  hubSignature,
  inboundWebhook,
  postSignedWebhook,
  statusWebhook,
  waMessage,
  wamid,
  waStatus,
} from '../fake-graph/webhooks.js';
import {
  PUBLIC_URL,
  business,
  connectedAccount,
  deliver,
  drain,
  events,
  jobsOf,
  messageRow,
  reconnect,
  sentText,
  startE2E,
  type E2E,
} from './whatsapp-e2e-helpers.js';

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

async function inboundRows(accountId: string) {
  return e.t.db
    .selectFrom('messages')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('direction', '=', 'inbound')
    .orderBy('created_at')
    .execute();
}

async function contactsOf(accountId: string) {
  return e.t.db
    .selectFrom('contacts')
    .select(['id', 'phone', 'name'])
    .where('account_id', '=', accountId)
    .execute();
}

describe('the webhook route of a connection made through the API', () => {
  it('answers Meta’s handshake with the verify token the PUT returned', async () => {
    const c = await connectedAccount(e);
    const res = await e.t.app.inject({
      method: 'GET',
      url: `/channels/${c.connection.id}/webhook`,
      query: {
        'hub.mode': 'subscribe',
        'hub.verify_token': c.connection.verify_token,
        'hub.challenge': '1158201444',
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('1158201444');
  });

  it('a new app secret takes effect at once for the route, though the connection was cached; a removed connection is a 404', async () => {
    const c = await connectedAccount(e);
    const waId = randomPhone().slice(1);
    const payload = inboundWebhook(
      business(c),
      { waId, name: 'Rotating' },
      waMessage.text(waId, 'hi'),
    );
    // Cached by this delivery.
    expect((await postSignedWebhook(c.webhookUrl, payload, c.appSecret)).status).toBe(200);
    const rotated = randomBytes(16).toString('hex');
    const res = await reconnect(c, { app_secret: rotated });
    expect(res.statusCode, res.body).toBe(200);
    expect((await postSignedWebhook(c.webhookUrl, payload, c.appSecret)).status).toBe(401);
    expect((await postSignedWebhook(c.webhookUrl, payload, rotated)).status).toBe(200);
    const removed = await c.acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
    expect(removed.statusCode, removed.body).toBe(200);
    expect((await postSignedWebhook(c.webhookUrl, payload, rotated)).status).toBe(404);
    await drain(e, c.acc.accountId);
  });

  it('a bad or missing signature is a 401 and nothing is stored', async () => {
    const c = await connectedAccount(e);
    const waId = randomPhone().slice(1);
    const payload = inboundWebhook(business(c), { waId, name: 'Eve' }, waMessage.text(waId, 'hi'));
    const raw = Buffer.from(JSON.stringify(payload));
    for (const signature of [
      hubSignature('not-the-app-secret', raw),
      hubSignature(c.appSecret, Buffer.concat([raw, Buffer.from(' ')])),
      `sha256=${'0'.repeat(64)}`,
      'sha1=abc',
      null,
    ]) {
      const res = await postSignedWebhook(c.webhookUrl, raw, c.appSecret, { signature });
      expect(res.status, String(signature)).toBe(401);
      expect(JSON.parse(res.body).error.code).toBe('unauthorized');
    }
    await drain(e, c.acc.accountId);
    const stored = await e.t.db
      .selectFrom('inbound_webhooks')
      .select('id')
      .where('account_id', '=', c.acc.accountId)
      .execute();
    expect(stored).toEqual([]);
    expect(await jobsOf(e, c.acc.accountId)).toEqual([]);
    expect(await inboundRows(c.acc.accountId)).toEqual([]);
    expect(await contactsOf(c.acc.accountId)).toEqual([]);
    expect(await events(e, c.acc.accountId)).toEqual([]);
  });
});

describe('inbound messages through the real route', () => {
  it('a new sender becomes a contact (+wa_id, profile name) with message.received', async () => {
    const c = await connectedAccount(e);
    const waId = randomPhone().slice(1);
    const id = wamid();
    await deliver(
      c,
      inboundWebhook(business(c), { waId, name: 'Grace Hopper' }, waMessage.text(waId, 'Hi!', id)),
    );
    // Stored and answered; the app processes the stored copy right after (drain waits for it).
    await drain(e, c.acc.accountId);

    const contacts = await contactsOf(c.acc.accountId);
    expect(contacts).toEqual([{ id: expect.any(String), phone: `+${waId}`, name: 'Grace Hopper' }]);
    const [row, ...more] = await inboundRows(c.acc.accountId);
    expect(more).toEqual([]);
    expect(row).toMatchObject({
      type: 'text',
      content: 'Hi!',
      status: 'delivered',
      provider_message_id: id,
    });
    const received = await events(e, c.acc.accountId, 'message.received');
    expect(received.map((x) => x.data)).toEqual([
      expect.objectContaining({ id: row!.id, direction: 'inbound', content: 'Hi!' }),
    ]);
    expect((await events(e, c.acc.accountId, 'contact.created')).map((x) => x.data)).toEqual([
      expect.objectContaining({ id: contacts[0]!.id, phone: `+${waId}`, name: 'Grace Hopper' }),
    ]);
    const conversation = await c.acc.call({
      method: 'GET',
      url: `/v1/conversations/${row!.conversation_id}`,
    });
    expect(conversation.json()).toMatchObject({ channel: 'whatsapp', contact_id: contacts[0]!.id });
  });

  it('Meta’s duplicates take effect once: the same delivery twice, and the id in another one', async () => {
    const c = await connectedAccount(e);
    const waId = randomPhone().slice(1);
    const id = wamid();
    const payload = inboundWebhook(
      business(c),
      { waId, name: 'Dup' },
      waMessage.text(waId, 'once', id),
    );
    await deliver(c, payload);
    await deliver(c, payload);
    await drain(e, c.acc.accountId);
    // A retry of Meta's, batched with a new message.
    const next = wamid();
    await deliver(
      c,
      inboundWebhook(
        business(c),
        { waId, name: 'Dup' },
        waMessage.text(waId, 'once', id),
        waMessage.text(waId, 'twice', next),
      ),
    );
    await drain(e, c.acc.accountId);

    const rows = await inboundRows(c.acc.accountId);
    expect(rows.map((r) => [r.provider_message_id, r.content])).toEqual([
      [id, 'once'],
      [next, 'twice'],
    ]);
    expect(await contactsOf(c.acc.accountId)).toHaveLength(1);
    expect(await events(e, c.acc.accountId, 'message.received')).toHaveLength(2);
    expect(await events(e, c.acc.accountId, 'contact.created')).toHaveLength(1);
  });

  it('an image is downloaded through Graph with the token, kept, and served at GET /v1/media/{id}', async () => {
    const c = await connectedAccount(e);
    const waId = randomPhone().slice(1);
    const mediaId = String(1_000_000 + Math.floor(Math.random() * 1e6));
    const bytes = randomBytes(3000);
    e.graph.addMedia({
      id: mediaId,
      bytes,
      mimeType: 'image/jpeg',
      phoneNumberId: c.phoneNumberId,
    });
    await deliver(
      c,
      inboundWebhook(
        business(c),
        { waId, name: 'Pic' },
        waMessage.image(waId, { id: mediaId, caption: 'my receipt' }),
      ),
    );
    await drain(e, c.acc.accountId);

    // Graph was asked for the URL, then the URL was fetched, both with the connection's token.
    const lookups = e.graph.find({ method: 'GET', resource: mediaId });
    expect(lookups.map((r) => r.token)).toEqual([c.accessToken]);
    const downloads = e.graph.find({ method: 'GET', resource: 'whatsapp_business/attachments' });
    expect(downloads.map((r) => [r.query.mid, r.token])).toEqual([[mediaId, c.accessToken]]);

    const [row] = await inboundRows(c.acc.accountId);
    expect(row).toMatchObject({ type: 'image', content: 'my receipt' });
    expect(row!.media_url).toMatch(new RegExp(`^${PUBLIC_URL}/v1/media/[A-Za-z0-9_]+$`));
    const path = row!.media_url!.slice(PUBLIC_URL.length);
    const res = await c.acc.call({ method: 'GET', url: path });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('image/jpeg');
    expect(res.rawPayload.equals(bytes)).toBe(true);

    // Another account's key does not see it.
    const other = await connectedAccount(e);
    expect((await other.acc.call({ method: 'GET', url: path })).statusCode).toBe(404);
  });
});

describe('status webhooks on messages sent through the API', () => {
  it('a token Graph refuses while downloading inbound media marks the connection error, as a send would', async () => {
    const c = await connectedAccount(e);
    const waId = randomPhone().slice(1);
    const mediaId = String(1_000_000 + Math.floor(Math.random() * 1e6));
    e.graph.addMedia({
      id: mediaId,
      bytes: randomBytes(100),
      mimeType: 'image/jpeg',
      phoneNumberId: c.phoneNumberId,
    });
    e.graph.failNext({ method: 'GET', resource: mediaId }, 1, META_ERRORS.expiredToken);
    await deliver(
      c,
      inboundWebhook(business(c), { waId, name: 'Pic' }, waMessage.image(waId, { id: mediaId })),
    );
    await drain(e, c.acc.accountId);
    const res = await c.acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(res.json()).toMatchObject({ status: 'error', error: expect.stringContaining('(#190)') });
    // The message is kept all the same, with a note for its file.
    const [row] = await inboundRows(c.acc.accountId);
    expect(row).toBeDefined();
  });

  it('read before delivered: read, one message.read, and the late delivered changes nothing', async () => {
    const c = await connectedAccount(e);
    const m = await sentText(e, c);
    await deliver(c, statusWebhook(business(c), waStatus.read(m.wamid, m.to)));
    await drain(e, c.acc.accountId);
    await deliver(c, statusWebhook(business(c), waStatus.delivered(m.wamid, m.to)));
    await deliver(c, statusWebhook(business(c), waStatus.sent(m.wamid, m.to)));
    await drain(e, c.acc.accountId);

    expect(await messageRow(e, c.acc.accountId, m.id)).toMatchObject({
      status: 'read',
      failure_reason: null,
    });
    const moved = (await events(e, c.acc.accountId)).filter((x) =>
      ['message.delivered', 'message.read', 'message.failed'].includes(x.type),
    );
    expect(moved).toEqual([
      { type: 'message.read', data: expect.objectContaining({ id: m.id, status: 'read' }) },
    ]);
  });

  it('failed with errors[0]: its code and title as failure_reason, and message.failed once', async () => {
    const c = await connectedAccount(e);
    const m = await sentText(e, c);
    const failed = waStatus.failed(m.wamid, m.to, {
      code: 131047,
      title: 'Re-engagement message',
      details: 'More than 24 hours have passed since the recipient last replied.',
    });
    await deliver(c, statusWebhook(business(c), failed));
    await deliver(c, statusWebhook(business(c), failed));
    await drain(e, c.acc.accountId);
    await deliver(c, statusWebhook(business(c), waStatus.delivered(m.wamid, m.to)));
    await drain(e, c.acc.accountId);

    const row = await messageRow(e, c.acc.accountId, m.id);
    expect(row).toMatchObject({
      status: 'failed',
      failure_reason: '(#131047) Re-engagement message',
    });
    expect((await events(e, c.acc.accountId, 'message.failed')).map((x) => x.data)).toEqual([
      expect.objectContaining({
        id: m.id,
        status: 'failed',
        failure_reason: '(#131047) Re-engagement message',
      }),
    ]);
    expect(await events(e, c.acc.accountId, 'message.delivered')).toEqual([]);
  });
});
