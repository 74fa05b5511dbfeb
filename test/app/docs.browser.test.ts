import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers.js';
import { launchChromium } from '../webchat/browser.js';
import { axeViolations, DESKTOP, RUN_BROWSER } from './app-helpers.js';

let t: TestApp;
let base: string;
const PUBLIC_URL = 'https://switchboard.example.com';
beforeAll(async () => {
  t = await startTestApp({ config: { publicUrl: PUBLIC_URL } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
});
afterAll(() => t.close());

describe('/docs, the API reference', () => {
  it('is titled "Switchboard API", loads only its own scripts and names no framework', async () => {
    const res = await fetch(`${base}/docs`, { redirect: 'follow' });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toMatch(/<title>Switchboard API<\/title>/);
    // File names aside (swagger-ui-bundle.js), nothing on the page names the framework.
    const text = html.replace(/(href|src)="[^"]*"/g, '').replace(/id="swagger-ui"/, '');
    expect(text).not.toMatch(/swagger/i);
    const scripts = [...html.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
    expect(scripts.length).toBeGreaterThan(0);
    for (const src of scripts) expect(new URL(src, res.url).origin).toBe(base);
    expect(html).not.toMatch(/<script(?![^>]*src=)[^>]*>\s*\S/); // no inline script
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    // Our favicon, not the framework's.
    const icon = /<link rel="icon" type="image\/svg\+xml" href="([^"]+)"/.exec(html);
    expect(icon).not.toBeNull();
    const favicon = await fetch(new URL(icon![1]!, res.url));
    expect(favicon.status).toBe(200);
  });

  it('names its servers from PUBLIC_URL', async () => {
    const doc = (await (await fetch(`${base}/docs/json`)).json()) as {
      servers: { url: string }[];
    };
    expect(doc.servers[0]!.url).toBe(PUBLIC_URL);
  });

  it.runIf(RUN_BROWSER)(
    'renders the title and the routes, with no top bar, in Chromium',
    async () => {
      let browser: Browser | undefined;
      try {
        browser = await launchChromium();
        const page = await browser.newPage({ viewport: DESKTOP });
        const requests: string[] = [];
        page.on('request', (r) => requests.push(r.url()));
        const errors: string[] = [];
        page.on('console', (m) => {
          // Swagger UI sets a few inline styles that the page's CSP blocks; it renders without them.
          if (m.type() === 'error' && !/Applying inline style/.test(m.text()))
            errors.push(m.text());
        });
        await page.goto(`${base}/docs`);
        await expect
          .poll(() => page.getByRole('heading', { name: /Switchboard API/ }).count(), {
            timeout: 15_000,
          })
          .toBeGreaterThan(0);
        await expect
          .poll(() => page.getByText('/v1/contacts', { exact: true }).count(), { timeout: 15_000 })
          .toBeGreaterThan(0);
        expect(await page.title()).toBe('Switchboard API');
        expect(await page.locator('.topbar').isVisible()).toBe(false);
        expect(await page.getByText('Explore').first().isVisible()).toBe(false);
        for (const url of requests) expect(new URL(url).origin).toBe(base);
        expect(errors).toEqual([]);
        // Two defects of Swagger UI's own markup remain (its operation summary nests a button in a
        // button; its server <select> has no label); fixing them needs another renderer (Scalar).
        const known = /^(serious nested-interactive|critical select-name):/;
        expect((await axeViolations(page)).filter((v) => !known.test(v))).toEqual([]);
      } finally {
        await browser?.close();
      }
    },
    // Swagger UI renders the whole document, and axe then walks all of it: slow on a busy machine.
    90_000,
  );
});
