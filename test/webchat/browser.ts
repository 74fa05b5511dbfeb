import { existsSync } from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { TcpProxy } from '../tcp-proxy.js';

/** Where the browser tests find Chromium: CHROMIUM_PATH, else Debian's package. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Whether the browser tests can run. Without Chromium they are skipped and say so loudly; in
 * CI (`CI` set) a missing Chromium is a failure, not a skip.
 */
export function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM_PATH)) return true;
  const message = `Chromium not found at ${CHROMIUM_PATH} (set CHROMIUM_PATH, or apt-get install -y chromium)`;
  if (process.env.CI) throw new Error(`${message}: the browser tests must run in CI`);
  process.stderr.write(
    `\n${'!'.repeat(78)}\n!! BROWSER TESTS SKIPPED: ${message}\n${'!'.repeat(78)}\n\n`,
  );
  return false;
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // Chromium's sandbox cannot start as root (CI containers run as root).
    args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
  });
}

/** A site that embeds the widget: one page per path, served on 127.0.0.1 and localhost. */
export class TestSite {
  private server: http.Server | null = null;
  private readonly pages = new Map<string, string>();
  port = 0;

  /** The site's origin on 127.0.0.1 (allowed in the tests); `localhost` is another origin. */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  get otherOrigin(): string {
    return `http://localhost:${this.port}`;
  }

  /**
   * A page embedding the widget with one script tag, after `head` (e.g. an identity);
   * `scriptAttrs` go on the script tag (e.g. the tests' `data-silence-ms`).
   */
  page(
    path: string,
    opts: { serviceUrl: string; widgetKey: string; head?: string; scriptAttrs?: string },
  ): void {
    this.pages.set(
      path,
      `<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shop</title>
<style>
  /* A host page whose styles must not reach the widget. */
  body { font-family: Georgia, serif; margin: 0; padding: 32px; background: #fdf6e3; }
  button, textarea, li { all: unset; color: red !important; font-size: 40px !important; }
  h1 { color: #333; }
  /* Rules that do reach the widget's host element (the body's last child): they must neither
     hide nor move it. */
  div, body > div, body > :last-child { display: none !important; }
  body > :last-child {
    position: absolute !important; top: 0 !important; left: 0 !important;
    transform: translate(-200px, -200px) scale(0.2) !important; opacity: 0 !important;
    visibility: hidden !important;
  }
  * { z-index: -1 !important; }
</style>
${opts.head ?? ''}
</head><body>
<h1>Example shop</h1>
<p>Our products, prices and opening hours.</p>
<script src="${opts.serviceUrl}/widget.js" data-widget-key="${opts.widgetKey}" ${opts.scriptAttrs ?? ''} async></script>
</body></html>`,
    );
  }

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const html = this.pages.get((req.url ?? '/').split('?')[0]!);
      if (!html) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

/** Polls `check` until it returns a value (not undefined) or the time is up. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 5_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A TCP proxy on 127.0.0.1 in front of the service whose widget streams a test can make go
 * silent: `stall()` stops forwarding either way on every open stream connection (one that carries
 * a request for `/stream?`) without closing it, as a NAT that forgot the connection would; other
 * connections, and streams opened later, pass as before.
 */
export class StallingProxy extends TcpProxy {
  private readonly streams = new Set<{ client: net.Socket; upstream: net.Socket }>();
  /** Stream connections opened so far. */
  streamsOpened = 0;

  protected override connected(client: net.Socket, upstream: net.Socket): void {
    // A stream may go over a kept-alive connection that carried other requests first.
    const entry = { client, upstream };
    client.on('data', (chunk: Buffer) => {
      if (!/^GET [^ ]*\/stream\?/m.test(chunk.toString('latin1'))) return;
      this.streamsOpened++;
      this.streams.add(entry);
    });
  }

  stall(): void {
    for (const { client, upstream } of this.streams) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      // Whatever arrives now is dropped.
      client.removeAllListeners('data').on('data', () => undefined);
      upstream.removeAllListeners('data').on('data', () => undefined);
    }
    this.streams.clear();
  }
}
