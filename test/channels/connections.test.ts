import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelProvider, ResolvedProvider } from '../../src/channels/channel.js';
import { ConnectionsRepository } from '../../src/connections/connections.repository.js';
import { WebchatRepository } from '../../src/webchat/webchat.repository.js';
import { ConnectionsService } from '../../src/connections/connections.service.js';
import {
  CONNECTION_TOPIC,
  ConnectionProviderResolver,
  type ProviderFactory,
} from '../../src/connections/provider-resolver.js';
import { SecretBox } from '../../src/connections/secret-box.js';
import { SECRETS_KEY_FILE, loadSecretsKey } from '../../src/connections/secrets-key.js';
import { GraphClient } from '../../src/channels/meta/graph-client.js';
import { ConfigError } from '../../src/config.js';
import { CacheFeed } from '../../src/db/cache-feed.js';
import { ReadCache } from '../../src/db/read-cache.js';
import { Transactor } from '../../src/db/transactor.js';
import { AppError } from '../../src/errors.js';
import { FakeGraph, META_ERRORS } from '../fake-graph/server.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { expectError, expectStatus } from '../inbox-helpers.js';
import { testDatabaseUrl } from '../database.js';

const PUBLIC_URL = 'https://switchboard.shop.example';
const KEY = randomBytes(32);
const secret = (prefix: string) => `${prefix}${randomBytes(24).toString('hex')}`;

// Ids shaped like Meta's (digits); tokens random so that a search for them finds only leaks.
const WA = {
  phone_number_id: '106540352242922',
  business_account_id: '102290129340398',
  access_token: secret('EAAWA'),
  app_secret: secret(''),
};
const MESSENGER = {
  page_id: '118750987654321',
  page_access_token: secret('EAAPG'),
  app_secret: secret(''),
};
const INSTAGRAM = {
  page_id: '118750911111111',
  instagram_account_id: '17841405822304914',
  page_access_token: secret('EAAIG'),
  app_secret: secret(''),
};
const SECRETS = [
  WA.access_token,
  WA.app_secret,
  MESSENGER.page_access_token,
  MESSENGER.app_secret,
  INSTAGRAM.page_access_token,
  INSTAGRAM.app_secret,
];

const whatsappBody = (over: Record<string, unknown> = {}) => ({
  provider: 'whatsapp_cloud',
  ...WA,
  ...over,
});

// What the service logs: pino writes to stdout's descriptor through fs, so the test listens there.
let logged = '';
const realWriteSync = fs.writeSync;
const realWrite = fs.write;
function captureLogs(): void {
  // The service's log lines are kept here rather than printed.
  const kept = (fd: unknown, data: unknown) => {
    if (fd !== 1 && fd !== 2) return false;
    const text = typeof data === 'string' ? data : String(data);
    if (!text.startsWith('{"level"')) return false;
    logged += text;
    return true;
  };
  (fs as { writeSync: unknown }).writeSync = (fd: number, data: unknown, ...rest: unknown[]) => {
    if (kept(fd, data)) return Buffer.byteLength(String(data));
    return (realWriteSync as (...a: unknown[]) => number)(fd, data, ...rest);
  };
  (fs as { write: unknown }).write = (fd: number, data: unknown, ...rest: unknown[]) => {
    if (!kept(fd, data)) return (realWrite as (...a: unknown[]) => void)(fd, data, ...rest);
    const done = rest.at(-1);
    if (typeof done === 'function') process.nextTick(done, null, Buffer.byteLength(String(data)));
  };
}
function stopCapturingLogs(): void {
  (fs as { writeSync: unknown }).writeSync = realWriteSync;
  (fs as { write: unknown }).write = realWrite;
}

let graph: FakeGraph;
let t: TestApp;

beforeAll(async () => {
  graph = await new FakeGraph().start();
  graph
    .addPhoneNumber({
      id: WA.phone_number_id,
      token: WA.access_token,
      display_phone_number: '+1 555-010-4477',
      verified_name: 'Shop Example',
      business_account_id: WA.business_account_id,
    })
    .addPage({ id: MESSENGER.page_id, token: MESSENGER.page_access_token, name: 'Shop Example' })
    .addPage({
      id: INSTAGRAM.page_id,
      token: INSTAGRAM.page_access_token,
      name: 'Shop Example IG',
      instagram_account_id: INSTAGRAM.instagram_account_id,
    });
  captureLogs();
  t = await startTestApp({
    config: {
      metaGraphUrl: graph.url,
      publicUrl: PUBLIC_URL,
      secretsKey: KEY,
      // Everything the service would log, so that the test can look for secrets in it.
      logLevel: 'trace',
    },
  });
});

afterAll(async () => {
  stopCapturingLogs();
  await t.close();
  await graph.stop();
});

async function put(acc: TestAccount, channel: string, payload: unknown) {
  return acc.call({ method: 'PUT', url: `/v1/channels/${channel}`, payload: payload as object });
}

async function row(accountId: string, channel: string) {
  return t.db
    .selectFrom('channel_connections')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('channel', '=', channel as 'whatsapp')
    .executeTakeFirst();
}

function unconnected(channel: string, provider: 'sandbox' | null = 'sandbox') {
  return {
    id: null,
    channel,
    provider,
    status: 'not_connected',
    error: null,
    settings: {},
    webhook_url: null,
    verify_token: null,
    created_at: null,
    updated_at: null,
  };
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function expectNoSecret(text: string, where: string) {
  for (const s of SECRETS) expect(text.includes(s), `${where} holds a secret`).toBe(false);
}

describe('GET /v1/channels', () => {
  it('lists the four channels in order, unconnected ones on the sandbox', async () => {
    const acc = await newAccount(t);
    const res = await acc.call({ method: 'GET', url: '/v1/channels' });
    expectStatus(res, 200);
    expect(res.json()).toEqual({
      data: ['whatsapp', 'instagram', 'messenger', 'webchat'].map((c) => unconnected(c)),
      total: 4,
      page: 1,
    });
  });

  it('answers one channel, and refuses a channel that does not exist', async () => {
    const acc = await newAccount(t);
    const res = await acc.call({ method: 'GET', url: '/v1/channels/messenger' });
    expectStatus(res, 200);
    expect(res.json()).toEqual(unconnected('messenger'));
    expectError(await acc.call({ method: 'GET', url: '/v1/channels/sms' }), 422, 'channel');
    expectError(await put(acc, 'sms', whatsappBody()), 422, 'channel');
  });

  it('needs an API key', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/channels' });
    expectError(res, 401);
  });
});

describe('PUT /v1/channels/{channel}', () => {
  it('connects WhatsApp after one Graph call, with what Graph said in settings', async () => {
    const acc = await newAccount(t);
    graph.reset();
    const res = await put(acc, 'whatsapp', whatsappBody());
    expectStatus(res, 200);
    const c = res.json<Record<string, string>>();
    expect(c).toEqual({
      id: expect.stringMatching(/^chn_[0-9A-Z]{26}$/),
      channel: 'whatsapp',
      provider: 'whatsapp_cloud',
      status: 'active',
      error: null,
      settings: {
        phone_number_id: WA.phone_number_id,
        business_account_id: WA.business_account_id,
        display_phone_number: '+1 555-010-4477',
        verified_name: 'Shop Example',
      },
      webhook_url: `${PUBLIC_URL}/channels/${c.id}/webhook`,
      verify_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      created_at: expect.stringMatching(ISO),
      updated_at: c.created_at,
    });
    expectNoSecret(res.body, 'the PUT response');

    expect(graph.requests).toHaveLength(1);
    const [call] = graph.requests;
    expect(call).toMatchObject({
      method: 'GET',
      path: `/v23.0/${WA.phone_number_id}`,
      token: WA.access_token,
      query: { fields: 'display_phone_number,verified_name' },
    });

    const one = await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(one.json()).toEqual(c);
    const all = await acc.call({ method: 'GET', url: '/v1/channels' });
    expect(all.json()).toEqual({
      data: [c, unconnected('instagram'), unconnected('messenger'), unconnected('webchat')],
      total: 4,
      page: 1,
    });
    expectNoSecret(one.body + all.body, 'a GET response');
  });

  it('stores the secrets sealed: not a byte of them in the row, and they open with the key', async () => {
    const acc = await newAccount(t);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    const stored = (await row(acc.accountId, 'whatsapp'))!;
    const raw = Buffer.concat([
      Buffer.from(JSON.stringify({ ...stored, secrets: null })),
      stored.secrets!,
    ]);
    for (const s of [WA.access_token, WA.app_secret]) {
      expect(raw.includes(Buffer.from(s))).toBe(false);
      expect(raw.includes(Buffer.from(s).toString('base64'))).toBe(false);
    }
    expect(new SecretBox(KEY).open(stored.secrets!)).toEqual({
      access_token: WA.access_token,
      app_secret: WA.app_secret,
    });
  });

  it('connects Messenger and Instagram through their Page', async () => {
    const acc = await newAccount(t);
    graph.reset();
    const m = await put(acc, 'messenger', { provider: 'messenger', ...MESSENGER });
    expectStatus(m, 200);
    expect(m.json()).toMatchObject({
      channel: 'messenger',
      provider: 'messenger',
      status: 'active',
      settings: { page_id: MESSENGER.page_id, page_name: 'Shop Example' },
    });
    expect(Object.keys(m.json<{ settings: object }>().settings).sort()).toEqual([
      'page_id',
      'page_name',
    ]);
    const i = await put(acc, 'instagram', { provider: 'instagram', ...INSTAGRAM });
    expectStatus(i, 200);
    expect(i.json<{ settings: unknown }>().settings).toEqual({
      page_id: INSTAGRAM.page_id,
      instagram_account_id: INSTAGRAM.instagram_account_id,
      page_name: 'Shop Example IG',
    });
    expectNoSecret(m.body + i.body, 'a PUT response');
    expect(graph.requests.map((r) => [r.path, r.token, r.query.fields])).toEqual([
      [`/v23.0/${MESSENGER.page_id}`, MESSENGER.page_access_token, 'name'],
      [
        `/v23.0/${INSTAGRAM.page_id}`,
        INSTAGRAM.page_access_token,
        'name,instagram_business_account',
      ],
    ]);
    const stored = (await row(acc.accountId, 'instagram'))!;
    expect(new SecretBox(KEY).open(stored.secrets!)).toEqual({
      page_access_token: INSTAGRAM.page_access_token,
      app_secret: INSTAGRAM.app_secret,
    });
  });

  it('refuses an Instagram account that is not the one linked to the Page', async () => {
    const acc = await newAccount(t);
    const res = await put(acc, 'instagram', {
      provider: 'instagram',
      ...INSTAGRAM,
      instagram_account_id: '17841400000000001',
    });
    expect(expectError(res, 422, 'instagram_account_id').message).toContain(
      INSTAGRAM.instagram_account_id,
    );
    expect(await row(acc.accountId, 'instagram')).toBeUndefined();
  });

  it("quotes Graph's refusal in a 422 and stores nothing", async () => {
    const acc = await newAccount(t);
    const badToken = secret('EAABAD');
    const res = await put(acc, 'whatsapp', whatsappBody({ access_token: badToken }));
    const err = expectError(res, 422, 'access_token');
    expect(err.code).toBe('validation_error');
    expect(err.message).toBe(
      'Graph refused the credentials: (#190) Invalid OAuth access token - Cannot parse access token',
    );
    expect(res.body.includes(badToken)).toBe(false);
    expect(await row(acc.accountId, 'whatsapp')).toBeUndefined();

    // A phone number the token may not see: Graph's "does not exist" answer, on the id.
    const other = await put(acc, 'whatsapp', whatsappBody({ phone_number_id: '999000111' }));
    expect(expectError(other, 422, 'phone_number_id').message).toMatch(
      /^Graph refused the credentials: \(#100\) Unsupported get request\. Object with ID '999000111' does not exist/,
    );
    expect(await row(acc.accountId, 'whatsapp')).toBeUndefined();
    const get = await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(get.json()).toEqual(unconnected('whatsapp'));
  });

  it('keeps the working connection when replacement credentials are refused', async () => {
    const acc = await newAccount(t);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    const before = (await row(acc.accountId, 'whatsapp'))!;
    expectError(await put(acc, 'whatsapp', whatsappBody({ access_token: 'nope' })), 422);
    expect(await row(acc.accountId, 'whatsapp')).toEqual(before);
  });

  it('answers 503 when Graph fails or cannot be reached, and stores nothing', async () => {
    const acc = await newAccount(t);
    graph.failNext(WA.phone_number_id, 1, META_ERRORS.apiService);
    const res = await put(acc, 'whatsapp', whatsappBody());
    expect(expectError(res, 503).message).toContain('(#2) Service temporarily unavailable');
    expect(res.headers['retry-after']).toBe('5');
    graph.failNext(WA.phone_number_id, 1, {
      ...META_ERRORS.tooManyCalls,
      headers: { 'retry-after': '30' },
    });
    const throttled = await put(acc, 'whatsapp', whatsappBody());
    expectError(throttled, 503);
    expect(throttled.headers['retry-after']).toBe('30');
    expect(await row(acc.accountId, 'whatsapp')).toBeUndefined();

    // Nothing listens on port 1.
    const down = await startTestApp({
      config: { metaGraphUrl: 'http://127.0.0.1:1', secretsKey: KEY, publicUrl: PUBLIC_URL },
      readCache: false,
    });
    try {
      const acc2 = await newAccount(down);
      const r = await put(acc2, 'whatsapp', whatsappBody());
      expect(expectError(r, 503).message).toMatch(/^Graph could not check the credentials now/);
      expect(await row(acc2.accountId, 'whatsapp')).toBeUndefined();
    } finally {
      await down.close();
    }
  });

  it('refuses unknown and missing fields before asking Graph', async () => {
    const acc = await newAccount(t);
    graph.reset();
    // Each body is judged against its provider's shape alone: one clear issue, not four.
    const refused = async (payload: unknown) => {
      const res = await put(acc, 'whatsapp', payload);
      expectStatus(res, 422);
      return res.json<{ error: { code: string; details: unknown } }>().error;
    };
    expect(await refused(whatsappBody({ webhook_secret: 'x' }))).toMatchObject({
      code: 'validation_error',
      details: [{ field: 'webhook_secret', issue: 'unknown field' }],
    });
    expect((await refused(whatsappBody({ page_id: '1' }))).details).toEqual([
      { field: 'page_id', issue: 'unknown field' },
    ]);
    const missing: Record<string, unknown> = whatsappBody();
    delete missing.app_secret;
    expect((await refused(missing)).details).toEqual([
      { field: 'app_secret', issue: 'is required' },
    ]);
    expect((await refused({})).details).toEqual([{ field: 'provider', issue: 'is required' }]);
    expect((await refused({ ...whatsappBody(), provider: 'twilio' })).details).toEqual([
      { field: 'provider', issue: 'must be one of whatsapp_cloud, messenger, instagram, webchat' },
    ]);
    expect((await refused([whatsappBody()])).details).toEqual([
      { field: 'body', issue: 'must be object' },
    ]);
    expect((await refused(whatsappBody({ phone_number_id: 'abc' }))).details).toMatchObject([
      { field: 'phone_number_id' },
    ]);
    expect((await refused(whatsappBody({ access_token: 7 }))).details).toMatchObject([
      { field: 'access_token' },
    ]);
    // A token goes into an Authorization header: one with a line break, a space or a letter
    // beyond ASCII could never be sent (it was a 503 "try again", for good).
    for (const token of ['EAAG\ncd', 'EAAG cd', 'EAAGé', 'EAAG\u0000'])
      expect((await refused(whatsappBody({ access_token: token }))).details).toMatchObject([
        { field: 'access_token' },
      ]);
    expect(graph.requests).toHaveLength(0);
    expect(await row(acc.accountId, 'whatsapp')).toBeUndefined();
  });

  it('refuses a provider that does not fit the channel', async () => {
    const acc = await newAccount(t);
    graph.reset();
    const res = await put(acc, 'messenger', whatsappBody());
    const err = expectError(res, 422, 'provider');
    expect(err.message).toBe(
      'provider whatsapp_cloud cannot connect the messenger channel; use messenger',
    );
    expectError(
      await put(acc, 'whatsapp', { provider: 'messenger', ...MESSENGER }),
      422,
      'provider',
    );
    expectError(
      await put(acc, 'messenger', { provider: 'instagram', ...INSTAGRAM }),
      422,
      'provider',
    );
    expect(graph.requests).toHaveLength(0);
    expect(await row(acc.accountId, 'messenger')).toBeUndefined();
  });

  it('connects webchat without asking Graph (test/webchat has the rest)', async () => {
    const acc = await newAccount(t);
    const before = graph.requests.length;
    const res = await put(acc, 'webchat', {
      provider: 'webchat',
      allowed_origins: ['https://shop.example'],
      identity_verification: 'off',
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(graph.requests).toHaveLength(before);
    expect(await row(acc.accountId, 'webchat')).toMatchObject({ provider: 'webchat' });
  });

  it('replaces the credentials in place: same id and verify token, new settings and secrets', async () => {
    const acc = await newAccount(t);
    const first = (await put(acc, 'whatsapp', whatsappBody())).json<Record<string, unknown>>();
    await new Promise((r) => setTimeout(r, 5));
    const rotated = secret('EAAWA');
    graph.addPhoneNumber({
      id: WA.phone_number_id,
      token: rotated,
      display_phone_number: '+1 555-010-4477',
      verified_name: 'Shop Example Renamed',
      business_account_id: WA.business_account_id,
    });
    try {
      const res = await put(acc, 'whatsapp', whatsappBody({ access_token: rotated }));
      expectStatus(res, 200);
      const second = res.json<Record<string, unknown>>();
      expect(second).toEqual({
        ...first,
        settings: { ...(first.settings as object), verified_name: 'Shop Example Renamed' },
        updated_at: expect.stringMatching(ISO),
      });
      expect(second.updated_at).not.toBe(first.updated_at);
      expect(res.body.includes(rotated)).toBe(false);
      const stored = (await row(acc.accountId, 'whatsapp'))!;
      expect(new SecretBox(KEY).open(stored.secrets!).access_token).toBe(rotated);
    } finally {
      graph.addPhoneNumber({
        id: WA.phone_number_id,
        token: WA.access_token,
        display_phone_number: '+1 555-010-4477',
        verified_name: 'Shop Example',
        business_account_id: WA.business_account_id,
      });
    }
  });
});

describe('a refusal reported later', () => {
  it('shows the connection in error until it is connected again', async () => {
    const acc = await newAccount(t);
    const first = (await put(acc, 'whatsapp', whatsappBody())).json<Record<string, unknown>>();
    const said = '(#190) Error validating access token: Session has expired';
    await t.services.connections.recordRefusal((await row(acc.accountId, 'whatsapp'))!, said);
    const res = await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' });
    expect(res.json()).toEqual({
      ...first,
      status: 'error',
      error: said,
      updated_at: expect.stringMatching(ISO),
    });
    const again = await put(acc, 'whatsapp', whatsappBody());
    expect(again.json()).toMatchObject({ id: first.id, status: 'active', error: null });
  });

  it('of credentials replaced since (or of a connection gone) marks nothing; of the current ones, it does', async () => {
    const acc = await newAccount(t);
    const message = {
      accountId: acc.accountId,
      messageId: 'msg_late_refusal',
      channel: 'whatsapp' as const,
      to: { contactId: 'con_1', phone: '+14155550190', identity: '14155550190' },
      type: 'text' as const,
      content: 'hi',
      template: null,
      media: null,
    };
    const SEND = { method: 'POST', resource: `${WA.phone_number_id}/messages` };
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    // The provider built from the first credentials, as a send in flight holds it.
    const before = await t.services.resolver.resolve(acc.accountId, 'whatsapp');
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    // Graph refuses the old call's token after the credentials were replaced: not the new ones'.
    graph.failNext(SEND, 1, META_ERRORS.expiredToken);
    expect(await before.send(message)).toMatchObject({ status: 'failed' });
    expect(await row(acc.accountId, 'whatsapp')).toMatchObject({ status: 'active', error: null });

    // The current provider's refusal is recorded.
    const current = await t.services.resolver.resolve(acc.accountId, 'whatsapp');
    expect(current).not.toBe(before);
    graph.failNext(SEND, 1, META_ERRORS.expiredToken);
    await current.send(message);
    expect(await row(acc.accountId, 'whatsapp')).toMatchObject({
      status: 'error',
      error: expect.stringContaining('(#190)') as string,
    });

    // Disconnected and connected anew: a refusal of the old connection's token marks nothing.
    const old = (await row(acc.accountId, 'whatsapp'))!;
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' }), 200);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    await t.services.connections.recordRefusal(old, '(#190) late');
    expect(await row(acc.accountId, 'whatsapp')).toMatchObject({ status: 'active', error: null });
  });
});

describe('DELETE /v1/channels/{channel}', () => {
  it('disconnects: back to the sandbox; a second time is a 404', async () => {
    const acc = await newAccount(t);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    const res = await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
    expectStatus(res, 200);
    expect(res.json()).toEqual({ success: true });
    expect((await acc.call({ method: 'GET', url: '/v1/channels/whatsapp' })).json()).toEqual(
      unconnected('whatsapp'),
    );
    expect(await row(acc.accountId, 'whatsapp')).toBeUndefined();
    const again = await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
    expect(expectError(again, 404).message).toBe('the whatsapp channel is not connected');
  });

  it('a new connection after a disconnect gets a new id and verify token', async () => {
    const acc = await newAccount(t);
    const a = (await put(acc, 'whatsapp', whatsappBody())).json<Record<string, string>>();
    await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
    const b = (await put(acc, 'whatsapp', whatsappBody())).json<Record<string, string>>();
    expect(b.id).not.toBe(a.id);
    expect(b.verify_token).not.toBe(a.verify_token);
  });
});

describe('accounts', () => {
  it('cannot see, replace or remove one another’s connections', async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const mine = (await put(a, 'whatsapp', whatsappBody())).json<Record<string, string>>();
    expect((await b.call({ method: 'GET', url: '/v1/channels/whatsapp' })).json()).toEqual(
      unconnected('whatsapp'),
    );
    const list = await b.call({ method: 'GET', url: '/v1/channels' });
    expect(list.json<{ data: { id: string | null }[] }>().data.every((c) => c.id === null)).toBe(
      true,
    );
    expectError(await b.call({ method: 'DELETE', url: '/v1/channels/whatsapp' }), 404);
    // Connecting the same number on another account makes another connection.
    const theirs = (await put(b, 'whatsapp', whatsappBody())).json<Record<string, string>>();
    expect(theirs.id).not.toBe(mine.id);
    expect(theirs.verify_token).not.toBe(mine.verify_token);
    expect((await a.call({ method: 'GET', url: '/v1/channels/whatsapp' })).json()).toEqual(mine);
  });
});

describe('secrets never leave', () => {
  it('appear in no log line and no event', async () => {
    const acc = await newAccount(t);
    await put(acc, 'whatsapp', whatsappBody());
    await put(acc, 'messenger', { provider: 'messenger', ...MESSENGER });
    await put(acc, 'instagram', { provider: 'instagram', ...INSTAGRAM });
    await put(acc, 'whatsapp', whatsappBody({ nope: WA.access_token }));
    await put(acc, 'messenger', whatsappBody());
    graph.failNext(MESSENGER.page_id, 1, META_ERRORS.somethingWentWrong);
    await put(acc, 'messenger', { provider: 'messenger', ...MESSENGER });
    // Bodies the service cannot parse: the parser's message may quote the text it choked on.
    await acc.call({
      method: 'PUT',
      url: '/v1/channels/whatsapp',
      headers: { 'content-type': 'application/json' },
      payload: `{"provider":"whatsapp_cloud","access_token":"${WA.access_token}",}`,
    });
    await acc.call({
      method: 'PUT',
      url: '/v1/channels/whatsapp',
      headers: { 'content-type': 'text/plain' },
      payload: WA.access_token,
    });
    await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' });
    // The capture works: the requests above were logged.
    expect(logged).toContain('/v1/channels/whatsapp');
    expectNoSecret(logged, 'the log');
    const events = await t.db
      .selectFrom('events')
      .selectAll()
      .where('account_id', '=', acc.accountId)
      .execute();
    expectNoSecret(JSON.stringify(events), 'the events');
  });
});

describe('the sandbox endpoints on a channel connected to a real provider', () => {
  const inbound = (acc: TestAccount, channel: string, phone: string) =>
    acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: { channel, phone, type: 'text', content: 'hello' },
    });
  const status = (acc: TestAccount, id: string) =>
    acc.call({
      method: 'POST',
      url: `/v1/sandbox/messages/${id}/status`,
      payload: { status: 'read' },
    });

  it('refuse a simulated inbound message there (no contact made, no window opened), and take one on a sandbox channel', async () => {
    const acc = await newAccount(t);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    const refused = await inbound(acc, 'whatsapp', '+14155550111');
    expectError(refused, 422, 'channel');
    expect(refused.json().error.message).toBe(
      'the whatsapp channel is connected to a real provider (whatsapp_cloud), not the sandbox: the sandbox cannot act on it; its messages and statuses come from whatsapp_cloud',
    );
    const contacts = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(contacts.json().total).toBe(0);
    expectStatus(await inbound(acc, 'messenger', '+14155550111'), 201);
    // Disconnected: the sandbox again.
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' }), 200);
    expectStatus(await inbound(acc, 'whatsapp', '+14155550111'), 201);
  });

  it("refuse to move a status of a message on such a channel; a sandbox channel's message moves", async () => {
    const acc = await newAccount(t);
    // The contact wrote on both channels while they used the sandbox.
    const wrote = (await inbound(acc, 'whatsapp', '+14155550122')).json<{ id: string }>();
    expectStatus(await inbound(acc, 'messenger', '+14155550122'), 201);
    const contactId = (
      await acc.call({ method: 'GET', url: '/v1/contacts?search=%2B14155550122' })
    ).json<{ data: { id: string }[] }>().data[0]!.id;
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    const send = (channel: string) =>
      acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: { contact_id: contactId, channel, type: 'text', content: 'hi' },
      });
    const onWhatsapp = (await send('whatsapp')).json<{ id: string; status: string }>();
    expect(onWhatsapp.status).toBe('sent');
    for (const id of [onWhatsapp.id, wrote.id]) {
      const refused = await status(acc, id);
      expectError(refused, 422, 'id');
      expect(refused.json().error.message).toContain(`message ${id} is on it`);
    }
    expect((await row(acc.accountId, 'whatsapp'))!.status).toBe('active');
    const kept = await t.db
      .selectFrom('messages')
      .select('status')
      .where('account_id', '=', acc.accountId)
      .where('id', '=', onWhatsapp.id)
      .executeTakeFirstOrThrow();
    expect(kept.status).toBe('sent');

    const onMessenger = (await send('messenger')).json<{ id: string }>();
    const moved = await status(acc, onMessenger.id);
    expectStatus(moved, 200);
    expect(moved.json()).toMatchObject({ id: onMessenger.id, status: 'read' });
    expectError(await status(acc, 'msg_00000000000000000000000000'), 404);
  });
});

describe('SECRETS_KEY', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'switchboard-key-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is generated into DATA_DIR on the embedded default, owner-only, and reused', async () => {
    const dataDir = path.join(dir, 'data');
    const config = { secretsKey: null, databaseUrl: null, dataDir };
    const key = await loadSecretsKey(config);
    expect(key).toHaveLength(32);
    const file = path.join(dataDir, SECRETS_KEY_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(Buffer.from((await readFile(file, 'utf8')).trim(), 'base64').equals(key)).toBe(true);
    expect((await loadSecretsKey(config)).equals(key)).toBe(true);
    // Two first starts at once agree on one key.
    const racing = path.join(dir, 'race');
    const [k1, k2] = await Promise.all([
      loadSecretsKey({ ...config, dataDir: racing }),
      loadSecretsKey({ ...config, dataDir: racing }),
    ]);
    expect(k1.equals(k2)).toBe(true);
  });

  it('is the configured one when set, and never generated with DATABASE_URL', async () => {
    const dataDir = path.join(dir, 'configured');
    expect(await loadSecretsKey({ secretsKey: KEY, databaseUrl: null, dataDir })).toBe(KEY);
    await expect(
      loadSecretsKey({ secretsKey: null, databaseUrl: 'postgres://x@h/db', dataDir }),
    ).rejects.toThrow(ConfigError);
    await expect(stat(dataDir)).rejects.toThrow();
  });

  it('refuses a key file that is not a key', async () => {
    const dataDir = path.join(dir, 'bad');
    await fs.promises.mkdir(dataDir);
    await writeFile(path.join(dataDir, SECRETS_KEY_FILE), 'not base64 of 32 bytes\n');
    await expect(loadSecretsKey({ secretsKey: null, databaseUrl: null, dataDir })).rejects.toThrow(
      ConfigError,
    );
  });

  it('an app built without one: connecting a real provider is a 422 that says so', async () => {
    const noKey = await startTestApp({
      config: { metaGraphUrl: graph.url, secretsKey: null, publicUrl: PUBLIC_URL },
      readCache: false,
    });
    try {
      const acc = await newAccount(noKey);
      graph.reset();
      const res = await put(acc, 'whatsapp', whatsappBody());
      expect(expectError(res, 422).message).toMatch(/^SECRETS_KEY must be set/);
      expect(graph.requests).toHaveLength(0);
      expect(await row(acc.accountId, 'whatsapp')).toBeUndefined();
    } finally {
      await noKey.close();
    }
  });
});

describe('SANDBOX_ENABLED=false', () => {
  let off: TestApp;
  beforeAll(async () => {
    off = await startTestApp({
      config: {
        metaGraphUrl: graph.url,
        secretsKey: KEY,
        publicUrl: PUBLIC_URL,
        sandboxEnabled: false,
      },
    });
  });
  afterAll(() => off.close());

  it('shows unconnected channels with no provider, and the sandbox routes are gone', async () => {
    const acc = await newAccount(off);
    const list = await acc.call({ method: 'GET', url: '/v1/channels' });
    expect(list.json<{ data: unknown[] }>().data).toEqual(
      ['whatsapp', 'instagram', 'messenger', 'webchat'].map((c) => unconnected(c, null)),
    );
    const inbound = await acc.call({
      method: 'POST',
      url: '/v1/sandbox/inbound',
      payload: { channel: 'whatsapp', phone: '+14155550100', type: 'text', content: 'hi' },
    });
    expectError(inbound, 404);
  });

  it('refuses to send on an unconnected channel: a 422 naming the channel', async () => {
    const acc = await newAccount(off);
    const err = await off.services.resolver.resolve(acc.accountId, 'messenger').then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      code: 'validation_error',
      status: 422,
      message: 'the messenger channel is not connected; connect it with PUT /v1/channels/messenger',
    });
  });
});

describe('the provider resolver', () => {
  const sandbox: ChannelProvider = {
    name: 'sandbox',
    templatesBypassWindow: true,
    reachesAnyContact: true,
    send: () => Promise.resolve({ status: 'accepted', providerMessageId: 'x' }),
  };
  /** A provider that remembers what it was built from; `built` counts the builds. */
  let built = 0;
  const whatsappFactory: ProviderFactory = ({ row, secrets }) => {
    built++;
    return Object.assign(
      {
        name: 'whatsapp_cloud' as const,
        templatesBypassWindow: true,
        reachesAnyContact: false,
        send: () => Promise.resolve({ status: 'accepted' as const, providerMessageId: 'wamid' }),
      },
      { token: secrets.access_token, connectionId: row.id },
    );
  };
  const token = (p: ChannelProvider) => (p as unknown as { token?: string }).token;

  function resolverOn(opts: {
    cache: ReadCache<ResolvedProvider>;
    sandboxEnabled?: boolean;
    secretBox?: SecretBox | null;
    overrides?: Partial<Record<'whatsapp', ChannelProvider>>;
  }) {
    return new ConnectionProviderResolver({
      connections: new ConnectionsRepository(t.db),
      secretBox: opts.secretBox === undefined ? new SecretBox(KEY) : opts.secretBox,
      sandbox,
      sandboxEnabled: opts.sandboxEnabled ?? true,
      factories: { whatsapp_cloud: whatsappFactory },
      cache: opts.cache,
      overrides: opts.overrides,
    });
  }

  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    const until = Date.now() + 5_000;
    while (!(await check())) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('builds each connection’s provider once, and every process hears of changes', async () => {
    // A second process on the same database: its own cache, kept by its own change feed.
    const cache = new ReadCache<ResolvedProvider>({ maxEntries: 100, ttlMs: 60_000 });
    const feed = new CacheFeed({
      url: testDatabaseUrl(),
      log: { info: () => undefined, warn: () => undefined },
    });
    feed.subscribe(CONNECTION_TOPIC, cache);
    await feed.start();
    try {
      expect(cache.isEnabled).toBe(true);
      const other = resolverOn({ cache });
      const acc = await newAccount(t);
      expect(await other.resolve(acc.accountId, 'whatsapp')).toBe(sandbox);

      // Connected through the API process: the other one sees the new connection.
      expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
      await eventually(
        async () => (await other.resolve(acc.accountId, 'whatsapp')) !== sandbox,
        'the connection to reach the other process',
      );
      const provider = await other.resolve(acc.accountId, 'whatsapp');
      expect(provider.name).toBe('whatsapp_cloud');
      expect(token(provider)).toBe(WA.access_token);
      const builds = built;
      expect(await other.resolve(acc.accountId, 'whatsapp')).toBe(provider);
      expect(built).toBe(builds);
      // Another channel of the account is still the sandbox.
      expect(await other.resolve(acc.accountId, 'messenger')).toBe(sandbox);

      // Credentials replaced: the other process builds the provider again.
      const rotated = secret('EAAWA');
      graph.addPhoneNumber({
        id: WA.phone_number_id,
        token: rotated,
        display_phone_number: '+1 555-010-4477',
        verified_name: 'Shop Example',
        business_account_id: WA.business_account_id,
      });
      try {
        expectStatus(await put(acc, 'whatsapp', whatsappBody({ access_token: rotated })), 200);
      } finally {
        graph.addPhoneNumber({
          id: WA.phone_number_id,
          token: WA.access_token,
          display_phone_number: '+1 555-010-4477',
          verified_name: 'Shop Example',
          business_account_id: WA.business_account_id,
        });
      }
      await eventually(
        async () => token(await other.resolve(acc.accountId, 'whatsapp')) === rotated,
        'the new credentials to reach the other process',
      );

      // Disconnected: back to the sandbox there too.
      expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/whatsapp' }), 200);
      await eventually(
        async () => (await other.resolve(acc.accountId, 'whatsapp')) === sandbox,
        'the disconnection to reach the other process',
      );
    } finally {
      await feed.stop();
    }
  });

  it('forgets at once what its own process changed', async () => {
    // No change feed at all: only the service's own invalidation can tell this cache.
    const cache = new ReadCache<ResolvedProvider>({ maxEntries: 100, ttlMs: 60_000 });
    cache.setEnabled(true);
    const resolver = resolverOn({ cache });
    const service = new ConnectionsService({
      tx: new Transactor(t.db),
      connections: new ConnectionsRepository(t.db),
      graph: new GraphClient({ baseUrl: graph.url, version: 'v23.0' }),
      secretBox: new SecretBox(KEY),
      clock: t.clock,
      publicUrl: PUBLIC_URL,
      sandboxEnabled: true,
      changed: (accountId, channel) => resolver.forget(accountId, channel),
      visitors: new WebchatRepository(t.db),
      log: t.app.log,
    });
    const acc = await newAccount(t);
    const scope = { accountId: acc.accountId };
    expect(await resolver.resolve(acc.accountId, 'whatsapp')).toBe(sandbox);
    await service.connect(scope, 'whatsapp', {
      provider: 'whatsapp_cloud',
      ...WA,
    });
    expect((await resolver.resolve(acc.accountId, 'whatsapp')).name).toBe('whatsapp_cloud');
    await service.disconnect(scope, 'whatsapp');
    expect(await resolver.resolve(acc.accountId, 'whatsapp')).toBe(sandbox);
  });

  it('without the sandbox, refuses an unconnected channel with a 422 naming it', async () => {
    const cache = new ReadCache<ResolvedProvider>({ maxEntries: 100, ttlMs: 60_000 });
    const resolver = resolverOn({ cache, sandboxEnabled: false });
    const acc = await newAccount(t);
    await expect(resolver.resolve(acc.accountId, 'instagram')).rejects.toMatchObject({
      code: 'validation_error',
      status: 422,
      details: [{ field: 'channel', issue: 'instagram is not connected' }],
    });
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    expect((await resolver.resolve(acc.accountId, 'whatsapp')).name).toBe('whatsapp_cloud');
  });

  it('refuses a connection whose provider it cannot build, or whose secrets it cannot open', async () => {
    const cache = new ReadCache<ResolvedProvider>({ maxEntries: 100, ttlMs: 60_000 });
    const acc = await newAccount(t);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    expectStatus(await put(acc, 'messenger', { provider: 'messenger', ...MESSENGER }), 200);
    await expect(resolverOn({ cache }).resolve(acc.accountId, 'messenger')).rejects.toMatchObject({
      status: 422,
      message:
        'the messenger channel is connected to messenger, which this service cannot send through',
    });
    const otherKey = resolverOn({ cache, secretBox: new SecretBox(randomBytes(32)) });
    await expect(otherKey.resolve(acc.accountId, 'whatsapp')).rejects.toMatchObject({
      status: 422,
      message: expect.stringContaining('cannot be read with this SECRETS_KEY') as string,
    });
    await expect(
      resolverOn({ cache, secretBox: null }).resolve(acc.accountId, 'whatsapp'),
    ).rejects.toMatchObject({ status: 422 });
  });

  it('lets a test override win over the connection and the sandbox', async () => {
    const cache = new ReadCache<ResolvedProvider>({ maxEntries: 100, ttlMs: 60_000 });
    const fake: ChannelProvider = {
      name: 'whatsapp_cloud',
      templatesBypassWindow: true,
      reachesAnyContact: false,
      send: (m, s) => sandbox.send(m, s),
    };
    const resolver = resolverOn({ cache, sandboxEnabled: false, overrides: { whatsapp: fake } });
    const acc = await newAccount(t);
    expect(await resolver.resolve(acc.accountId, 'whatsapp')).toBe(fake);
    expectStatus(await put(acc, 'whatsapp', whatsappBody()), 200);
    expect(await resolver.resolve(acc.accountId, 'whatsapp')).toBe(fake);
  });
});
