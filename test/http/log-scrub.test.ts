import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDACTED, scrubLogLine, scrubUrl } from '../../src/logging.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { expectStatus } from '../inbox-helpers.js';
import { connectWebchat, ORIGIN, SECRETS_KEY } from '../webchat/webchat-helpers.js';

describe('scrubUrl', () => {
  it.each([
    ['/v1/contacts?api_key=sk_live_abc&limit=5', `/v1/contacts?api_key=${REDACTED}&limit=5`],
    ['/v1/contacts?limit=5&API_KEY=abc', `/v1/contacts?limit=5&API_KEY=${REDACTED}`],
    ['/x?api%5Fkey=abc&page=2', `/x?api%5Fkey=${REDACTED}&page=2`],
    ['/x?token[]=abc&token[0]=def', `/x?token[]=${REDACTED}&token[0]=${REDACTED}`],
    [
      '/x?access_token=a&key=b&secret=c',
      `/x?access_token=${REDACTED}&key=${REDACTED}&secret=${REDACTED}`,
    ],
    [
      '/x?password=a&sig=b&signature=c',
      `/x?password=${REDACTED}&sig=${REDACTED}&signature=${REDACTED}`,
    ],
    [
      '/channels/ch_1/webhook?hub.mode=subscribe&hub.verify_token=v&hub.challenge=42',
      `/channels/ch_1/webhook?hub.mode=subscribe&hub.verify_token=${REDACTED}&hub.challenge=42`,
    ],
    ['/x?token=', `/x?token=${REDACTED}`],
    ['/x?token&limit=5', '/x?token&limit=5'],
    ['/x?tokens=1&monkey=2', '/x?tokens=1&monkey=2'],
    ['/x?q=a%26token%3Db', '/x?q=a%26token%3Db'],
    ['https://h.example/p?token=abc#frag', `https://h.example/p?token=${REDACTED}#frag`],
    ['/v1/contacts', '/v1/contacts'],
    ['/x?bad=%E0%A4%A&key=%E0%A4%A', `/x?bad=%E0%A4%A&key=${REDACTED}`],
  ])('%s → %s', (url, scrubbed) => {
    expect(scrubUrl(url)).toBe(scrubbed);
  });
});

describe('scrubLogLine', () => {
  it('scrubs a URL inside a message, JSON escapes and all, and leaves valid JSON', () => {
    const line = `${JSON.stringify({
      level: 30,
      msg: 'Route GET:/v1/nope?access_token=ab"c\\d&limit=5 not found',
    })}\n`;
    const scrubbed = scrubLogLine(line);
    expect(JSON.parse(scrubbed).msg).toBe(
      `Route GET:/v1/nope?access_token=${REDACTED}&limit=5 not found`,
    );
  });

  it('replaces an API key wherever it is', () => {
    const line = JSON.stringify({ msg: 'GET /v1/contacts/sb_live_AbC-9_x was not found' });
    expect(JSON.parse(scrubLogLine(line)).msg).toBe(
      `GET /v1/contacts/sb_live_${REDACTED} was not found`,
    );
  });

  it('leaves a line without credentials as it is', () => {
    const line = JSON.stringify({ msg: 'is it running? yes', url: '/v1/contacts?limit=5&page=2' });
    expect(scrubLogLine(line)).toBe(line);
  });
});

describe('the service log', () => {
  let t: TestApp;
  let logged = '';
  beforeAll(async () => {
    t = await startTestApp({
      // Everything the service would log, so that the test can look for secrets in it.
      config: { logLevel: 'trace', secretsKey: SECRETS_KEY },
      logStream: new Writable({
        write(chunk: Buffer, _encoding, done) {
          logged += chunk.toString();
          done();
        },
      }),
    });
  });
  afterAll(() => t.close());

  const lines = () =>
    logged
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  it('holds no API key or visitor token sent in a query string, and keeps the other parameters', async () => {
    const acc = await newAccount(t);
    const c = await connectWebchat(acc);
    const session = await t.app.inject({
      method: 'POST',
      url: `/webchat/v1/${c.widget_key}/session`,
      headers: { origin: ORIGIN },
      payload: {},
    });
    expectStatus(session, 200);
    const visitorToken = session.json<{ token: string }>().token;
    const made = 'sk_live_madeup0123456789';
    logged = '';

    // A key by mistake in the query, beside the header and alone.
    await acc.call({ method: 'GET', url: `/v1/contacts?api_key=${made}&limit=5` });
    await t.app.inject({
      method: 'GET',
      url: `/v1/contacts?api_key=${encodeURIComponent(acc.apiKey)}&limit=5`,
    });
    // No such route.
    await t.app.inject({ method: 'GET', url: `/v1/nope?access_token=${made}&limit=5` });
    // A key in the path.
    await acc.call({ method: 'GET', url: `/v1/contacts/${acc.apiKey}` });
    // The widget's stream carries its token in the query (a bad Last-Event-ID ends it at once),
    // and a token sent there by mistake to another endpoint.
    await t.app.inject({
      method: 'GET',
      url: `/webchat/v1/${c.widget_key}/stream?token=${encodeURIComponent(visitorToken)}`,
      headers: { origin: ORIGIN, 'last-event-id': 'not a date' },
    });
    await t.app.inject({
      method: 'GET',
      url: `/webchat/v1/${c.widget_key}/messages?token=${encodeURIComponent(visitorToken)}&limit=5`,
      headers: { origin: ORIGIN },
    });
    // A signed media link (its signature is in the path).
    await t.app.inject({ method: 'GET', url: `/media/${acc.accountId}/med_1/${made}/a.png` });
    // Meta's verification handshake.
    await t.app.inject({
      method: 'GET',
      url: `/channels/ch_nope/webhook?hub.mode=subscribe&hub.verify_token=${made}&hub.challenge=42`,
    });

    const all = lines();
    const urls = all.flatMap((l) => {
      const req = l.req as { url?: string } | undefined;
      return req?.url ? [req.url] : [];
    });
    // The capture works: every request above was logged with its URL.
    expect(urls).toHaveLength(8);
    for (const secret of [made, acc.apiKey, visitorToken, encodeURIComponent(visitorToken)]) {
      expect(logged).not.toContain(secret);
    }
    expect(urls).toEqual([
      `/v1/contacts?api_key=${REDACTED}&limit=5`,
      `/v1/contacts?api_key=${REDACTED}&limit=5`,
      `/v1/nope?access_token=${REDACTED}&limit=5`,
      `/v1/contacts/sb_live_${REDACTED}`,
      `/webchat/v1/${c.widget_key}/stream?token=${REDACTED}`,
      `/webchat/v1/${c.widget_key}/messages?token=${REDACTED}&limit=5`,
      `/media/${acc.accountId}/med_1/${REDACTED}/a.png`,
      `/channels/ch_nope/webhook?hub.mode=subscribe&hub.verify_token=${REDACTED}&hub.challenge=42`,
    ]);
  });
});
