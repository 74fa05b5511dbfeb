import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { expectError, expectStatus } from '../inbox-helpers.js';
import { connectWebchat, ORIGIN, SECRETS_KEY } from './webchat-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    config: { secretsKey: SECRETS_KEY, publicUrl: 'https://sb.example' },
  });
});
afterAll(() => t.close());

describe('PUT /v1/channels/webchat', () => {
  it('connects: a public widget key, the settings, and the identity secret shown once', async () => {
    const acc = await newAccount(t);
    const res = await acc.call({
      method: 'PUT',
      url: '/v1/channels/webchat',
      payload: {
        provider: 'webchat',
        allowed_origins: ['https://shop.example', 'http://localhost:8080/'],
        identity_verification: 'required',
        title: 'Help',
        greeting: 'Hello!',
        color: '#AA00cc',
      },
    });
    expectStatus(res, 200);
    const c = res.json();
    expect(c).toMatchObject({
      channel: 'webchat',
      provider: 'webchat',
      status: 'active',
      webhook_url: null,
      verify_token: null,
      settings: {
        allowed_origins: ['https://shop.example', 'http://localhost:8080'],
        identity_verification: 'required',
        title: 'Help',
        greeting: 'Hello!',
        color: '#aa00cc',
        widget_url: 'https://sb.example/widget.js',
      },
    });
    expect(c.settings.widget_key).toMatch(/^wk_/);
    expect(c.identity_secret).toMatch(/^wcs_[0-9a-f]{64}$/);
    expect(JSON.stringify(c.settings)).not.toContain(c.identity_secret);

    // Read back and replaced: never the secret again, the same key and secret kept.
    const got = await acc.call({ method: 'GET', url: '/v1/channels/webchat' });
    expect(got.json().identity_secret).toBeUndefined();
    expect(got.body).not.toContain(c.identity_secret);
    const again = await acc.call({
      method: 'PUT',
      url: '/v1/channels/webchat',
      payload: { provider: 'webchat', allowed_origins: [ORIGIN], identity_verification: 'off' },
    });
    expectStatus(again, 200);
    expect(again.json().identity_secret).toBeUndefined();
    expect(again.json().settings).toMatchObject({
      widget_key: c.settings.widget_key,
      title: 'Chat with us',
      greeting: null,
      color: '#2563eb',
    });
    const list = await acc.call({ method: 'GET', url: '/v1/channels' });
    expect(list.body).not.toContain(c.identity_secret);
  });

  it('rotates the identity secret on request', async () => {
    const acc = await newAccount(t);
    const first = await connectWebchat(acc);
    const rotated = await acc.call({
      method: 'PUT',
      url: '/v1/channels/webchat',
      payload: {
        provider: 'webchat',
        allowed_origins: [ORIGIN],
        identity_verification: 'off',
        rotate_identity_secret: true,
      },
    });
    expectStatus(rotated, 200);
    expect(rotated.json().identity_secret).toMatch(/^wcs_/);
    expect(rotated.json().identity_secret).not.toBe(first.identity_secret);
    expect(rotated.json().settings.widget_key).toBe(first.widget_key);
  });

  it.each([
    ['a path', 'https://shop.example/chat'],
    ['a query', 'https://shop.example?x=1'],
    ['no scheme', 'shop.example'],
    ['another scheme', 'ftp://shop.example'],
    ['user info', 'https://me@shop.example'],
    ['a wildcard', '*'],
  ])('refuses an origin with %s', async (_what, origin) => {
    const acc = await newAccount(t);
    const res = await acc.call({
      method: 'PUT',
      url: '/v1/channels/webchat',
      payload: { provider: 'webchat', allowed_origins: [origin], identity_verification: 'off' },
    });
    expectError(res, 422, 'allowed_origins[0]');
  });

  it('refuses a bad colour, an empty origin list, unknown fields and a bad mode', async () => {
    const acc = await newAccount(t);
    const put = (payload: Record<string, unknown>) =>
      acc.call({
        method: 'PUT',
        url: '/v1/channels/webchat',
        payload: {
          provider: 'webchat',
          allowed_origins: [ORIGIN],
          identity_verification: 'off',
          ...payload,
        },
      });
    expectError(await put({ color: 'red' }), 422, 'color');
    expectError(await put({ allowed_origins: [] }), 422, 'allowed_origins');
    expectError(await put({ widget_key: 'wk_mine' }), 422);
    expectError(await put({ identity_verification: 'sometimes' }), 422);
  });

  it('disconnects: back to the sandbox, and the widget key stops working', async () => {
    const acc = await newAccount(t);
    const c = await connectWebchat(acc);
    expectStatus(await acc.call({ method: 'DELETE', url: '/v1/channels/webchat' }), 200);
    const res = await t.app.inject({
      method: 'POST',
      url: `/webchat/v1/${c.widget_key}/session`,
      headers: { origin: ORIGIN },
      payload: {},
    });
    expectError(res, 404);
  });
});
