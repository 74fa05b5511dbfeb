import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { expect } from 'vitest';
import { buildApp } from '../../app/build.js';
import { startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact } from '../inbox-helpers.js';
import { builtAt, newestSource } from '../sources.js';
import { chromiumAvailable, launchChromium } from '../webchat/browser.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const APP_SOURCES = path.join(ROOT, 'app');
const BUILT_PAGE = path.join(ROOT, 'dist/app/index.html');

/**
 * The app as `npm run build` makes it (GET /app serves dist/app): built here when missing or
 * older than its sources, so a test run never tests a stale app. One build serves every file.
 */
export async function ensureAppBuilt(): Promise<void> {
  const built = builtAt(BUILT_PAGE);
  if (built !== 0 && newestSource(APP_SOURCES) <= built) return;
  // Test files run in parallel processes: one builds, the others wait for it.
  const lock = path.join(ROOT, 'dist/.app-build.lock');
  await mkdir(path.dirname(lock), { recursive: true });
  try {
    await mkdir(lock);
  } catch {
    while (
      await stat(lock).then(
        () => true,
        () => false,
      )
    ) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return;
  }
  try {
    await buildApp();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function axeViolations(page: Page): Promise<string[]> {
  const source = path.join(ROOT, 'node_modules/axe-core/axe.min.js');
  // The page's CSP allows only its own scripts: axe goes in through the test's own channel.
  await page.addScriptTag({ path: source }).catch(async () => {
    const { readFile } = await import('node:fs/promises');
    await page.evaluate(await readFile(source, 'utf8'));
  });
  const results = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } })
      .axe;
    return axe.run();
  });
  return (
    results.violations as {
      id: string;
      impact: string;
      help: string;
      nodes: { target: unknown }[];
    }[]
  )
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${JSON.stringify(v.nodes.map((n) => n.target))})`);
}

/**
 * The browser tests run once per CI run: on the embedded database (`npm test`), not again on
 * the machine's server (TEST_DATABASE_URL), where they would test the same app twice.
 */
export const RUN_BROWSER = chromiumAvailable() && !process.env.TEST_DATABASE_URL;

export const PASSWORD = 'a long enough password';
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** A service listening on a port of its own and a Chromium to drive it: one per test file. */
export interface BrowserApp {
  t: TestApp;
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

export async function startBrowserApp(
  opts: Pick<Parameters<typeof startTestApp>[0] & object, 'config' | 'databaseUrl'> = {},
): Promise<BrowserApp> {
  await ensureAppBuilt();
  const t = await startTestApp(opts);
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const browser = await launchChromium();
  return {
    t,
    base,
    browser,
    close: async () => {
      await browser.close();
      await t.close();
    },
  };
}

export interface InvitedUser {
  id: string;
  name: string;
  email: string;
  inviteUrl: string;
}

let users = 0;
/** A user made through the account's API key (POST /v1/users), with their invite link. */
export async function inviteUser(
  acc: TestAccount,
  name: string,
  role: 'admin' | 'agent' = 'agent',
): Promise<InvitedUser> {
  const email = `user-${process.pid}-${++users}-${Date.now()}@example.com`;
  const res = await acc.call({ method: 'POST', url: '/v1/users', payload: { name, email, role } });
  expect(res.statusCode, res.body).toBe(201);
  return { id: res.json().id, name, email, inviteUrl: res.json().invite_url };
}

export interface SignedIn {
  context: BrowserContext;
  page: Page;
  user: InvitedUser;
}

/** A new browser that accepts the user's invite through the app: signed in, in the inbox. */
export async function acceptInvite(
  app: BrowserApp,
  user: InvitedUser,
  viewport = DESKTOP,
): Promise<SignedIn> {
  const context = await app.browser.newContext({ viewport });
  const page = await context.newPage();
  await page.goto(`${app.base}/app/invite${new URL(user.inviteUrl).hash}`);
  await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
  await page.getByRole('button', { name: 'Accept invite' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
  return { context, page, user };
}

/** A new browser that signs in through the app's sign-in screen. */
export async function signIn(
  app: BrowserApp,
  user: Pick<InvitedUser, 'email'>,
  viewport = DESKTOP,
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await app.browser.newContext({ viewport });
  const page = await context.newPage();
  await page.goto(`${app.base}/app`);
  await page.getByRole('textbox', { name: 'Email' }).fill(user.email);
  await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
  return { context, page };
}

/** A new user of the account, invited with its API key and signed in through the app. */
export async function newAgent(
  app: BrowserApp,
  acc: TestAccount,
  name = 'Ada Lovelace',
  opts: { role?: 'admin' | 'agent'; viewport?: typeof DESKTOP } = {},
): Promise<SignedIn> {
  return acceptInvite(app, await inviteUser(acc, name, opts.role ?? 'agent'), opts.viewport);
}

/** A contact with a name (made with the account's API key). */
export async function namedContact(
  acc: TestAccount,
  name: string,
): Promise<{ id: string; phone: string }> {
  const contact = await createContact(acc);
  const res = await acc.call({
    method: 'PUT',
    url: `/v1/contacts/${contact.id}`,
    payload: { name },
  });
  expect(res.statusCode, res.body).toBe(200);
  return contact;
}

/** Every dialog the page opens (alert, confirm…), dismissed: a test expects none. */
export function watchDialogs(page: Page): string[] {
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  return dialogs;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(body.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), body])), 0);
  return Buffer.concat([head, body, crc]);
}

/** A real PNG (RGB, 8 bits) a browser decodes: each pixel's colour from `pixel(x, y)`. */
export function png(
  width: number,
  height: number,
  pixel: (x: number, y: number) => [number, number, number],
): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const rows = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    for (let x = 0; x < width; x++) rows.set(pixel(x, y), row + 1 + x * 3);
  }
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A picture for a message: a parcel on a doorstep, near enough. */
export function parcelPhoto(): Buffer {
  return png(320, 220, (x, y) => {
    if (x > 110 && x < 230 && y > 70 && y < 180) {
      if (Math.abs(x - 170) < 6 || Math.abs(y - 110) < 5) return [214, 190, 140];
      return [181, 136, 84];
    }
    if (y > 180) return [120 + ((x * 7) % 20), 110, 100];
    return [200 - y / 4, 215 - y / 5, 230 - y / 6];
  });
}
