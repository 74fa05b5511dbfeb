import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APP_DIST } from '../../src/app-shell/app.route.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { ensureAppBuilt } from './app-helpers.js';

describe('GET /app: the agent inbox, served by the service', () => {
  let t: TestApp;
  let script: string;

  beforeAll(async () => {
    await ensureAppBuilt();
    t = await startTestApp();
    script = (await readdir(`${APP_DIST}assets`)).find((f) => f.endsWith('.js'))!;
  });
  afterAll(async () => t?.close());

  it('answers the page with a strict CSP, no framing and no sniffing', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/app' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body).toContain('<div id="root">');
    // No inline script: every script is a file of the app.
    expect(res.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });

  it('answers the page for any path under /app, so that deep links open', async () => {
    for (const url of ['/app/', '/app/inbox', '/app/conversations/conv_123', '/app/setup']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toContain('<div id="root">');
      expect(res.headers['content-security-policy'], url).toBeDefined();
    }
  });

  it('serves hashed assets for a year, gzipped when asked, and 404s a missing one', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: `/app/assets/${script}`,
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers['x-content-type-options']).toBe('nosniff');

    const missing = await t.app.inject({ method: 'GET', url: '/app/assets/gone-1234.js' });
    expect(missing.statusCode).toBe(404);
    const escape = await t.app.inject({ method: 'GET', url: '/app/%2e%2e/package.json' });
    expect(escape.body).not.toContain('"name": "switchboard"');
  });

  it('sends / to /app', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('/app');
  });
});
