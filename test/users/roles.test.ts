import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteAccess } from '../../src/http/auth.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';
import { expectError, expectStatus } from '../inbox-helpers.js';
import { signedInUser } from './session-helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const who = (r: RouteAccess) => `${r.access}${r.sessionOnly ? ' (session only)' : ''}`;
const path = (url: string) => url.replace(/:(\w+)/g, '{$1}');
const byRoute = (a: RouteAccess, b: RouteAccess) =>
  a.url === b.url ? a.method.localeCompare(b.method) : a.url.localeCompare(b.url);

/** The route × role table of docs/api.md, row by row. */
function documentedTable(): string[] {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const table = doc.slice(doc.search(/^\| Route +\| Who +\|/m));
  return [...table.matchAll(/^\|\s*`([A-Z]+ \/v1\/[^`]+)`\s*\|\s*([^|]+?)\s*\|$/gm)].map(
    (m) => `${m[1]} → ${m[2]}`,
  );
}

describe('the route × role table', () => {
  it('documents every /v1 route with the role the server enforces, and no other', () => {
    const registered = [...t.app.routeAccess]
      .sort(byRoute)
      .map((r) => `${r.method} ${path(r.url)} → ${who(r)}`);
    expect(registered.length).toBeGreaterThan(60);
    expect(documentedTable()).toEqual(registered);
  });

  it('walking it: an agent gets 403 on each admin route and never on an agent route', async () => {
    const acc = await newAccount(t);
    const routes = t.app.routeAccess.filter(
      // Sign-out and password change would end the walking session; their own tests cover them.
      (r) => r.access !== 'anyone' && !(r.sessionOnly && r.method !== 'GET'),
    );
    const agent = await signedInUser(t, acc, { role: 'agent' });
    const admin = await signedInUser(t, acc, { role: 'admin' });
    for (const route of routes) {
      const url = route.url.replace(/:channel/, 'whatsapp').replace(/:(\w+)/g, 'x_0');
      // The event stream streams on: its HEAD answers the headers only, after the same checks.
      const method = route.url === '/v1/events/stream' ? 'HEAD' : route.method;
      const request = {
        method: method as 'GET',
        url,
        payload: route.method === 'GET' || route.method === 'DELETE' ? undefined : {},
      };
      const asAgent = await agent.call(request);
      const asAdmin = await admin.call(request);
      const label = `${route.method} ${route.url}: agent ${asAgent.statusCode}, admin ${asAdmin.statusCode}`;
      if (route.access === 'admin') {
        expect(asAgent.statusCode, label).toBe(403);
        expect(asAgent.json().error.code, label).toBe('forbidden');
      } else {
        expect(asAgent.statusCode, label).not.toBe(403);
      }
      // An admin is never refused for the role (a stream route answers 200 and streams: skipped).
      expect(asAdmin.statusCode, label).not.toBe(403);
    }
  });

  it('an agent works the inbox but cannot manage webhooks, users, keys or delete contacts', async () => {
    const acc = await newAccount(t);
    const agent = await signedInUser(t, acc, { role: 'agent' });
    const contact = await agent.call({
      method: 'POST',
      url: '/v1/contacts',
      payload: { phone: '+14155550110' },
    });
    expectStatus(contact, 201);
    expectError(
      await agent.call({ method: 'DELETE', url: `/v1/contacts/${contact.json().id}` }),
      403,
    );
    expectError(
      await agent.call({
        method: 'POST',
        url: '/v1/webhooks',
        payload: { url: 'https://example.com/h', events: ['message.received'] },
      }),
      403,
    );
    expectError(
      await agent.call({
        method: 'POST',
        url: '/v1/users',
        payload: { name: 'X', email: 'x@example.com' },
      }),
      403,
    );
    expectError(await agent.call({ method: 'GET', url: '/v1/api-keys' }), 403);
    expectError(
      await agent.call({
        method: 'PATCH',
        url: `/v1/users/${agent.userId}`,
        payload: { role: 'admin' },
      }),
      403,
    );
    // Nothing of it happened.
    expect((await acc.call({ method: 'GET', url: '/v1/contacts' })).json().total).toBe(1);
    expect((await acc.call({ method: 'GET', url: '/v1/users' })).json().total).toBe(1);
  });
});

describe('/v1/api-keys', () => {
  it('an admin issues a key (shown once), lists keys without it, and revokes one of the account', async () => {
    const acc = await newAccount(t);
    const admin = await signedInUser(t, acc, { role: 'admin' });
    const made = await admin.call({
      method: 'POST',
      url: '/v1/api-keys',
      payload: { name: 'zapier' },
    });
    expectStatus(made, 201);
    expect(made.json()).toEqual({
      id: expect.stringMatching(/^key_/),
      api_key: expect.stringMatching(/^sb_live_/),
      name: 'zapier',
      created_at: expect.any(String),
    });
    const key = made.json().api_key as string;
    const withKey = { authorization: `Bearer ${key}` };
    expectStatus(await t.app.inject({ method: 'GET', url: '/v1/contacts', headers: withKey }), 200);
    const listed = await admin.call({ method: 'GET', url: '/v1/api-keys' });
    expectStatus(listed, 200);
    expect(listed.json().data.map((k: { id: string }) => k.id)).toEqual([
      made.json().id,
      acc.keyId,
    ]);
    expect(JSON.stringify(listed.json())).not.toContain(key);
    // Another account's key is not found, and stays valid.
    const other = await newAccount(t);
    expectError(await other.call({ method: 'DELETE', url: `/v1/api-keys/${made.json().id}` }), 404);
    expectStatus(await t.app.inject({ method: 'GET', url: '/v1/contacts', headers: withKey }), 200);
    expectStatus(
      await admin.call({ method: 'DELETE', url: `/v1/api-keys/${made.json().id}` }),
      200,
    );
    expectError(await t.app.inject({ method: 'GET', url: '/v1/contacts', headers: withKey }), 401);
    // An API key acts as an admin.
    expectStatus(await acc.call({ method: 'POST', url: '/v1/api-keys' }), 201);
  });
});
