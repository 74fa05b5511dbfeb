import { sql } from 'kysely';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { expectStatus } from '../inbox-helpers.js';
import { ACCEPTED, fileUpload } from '../media/sample-files.js';
import { connectWebchat, ORIGIN, SECRETS_KEY } from '../webchat/webchat-helpers.js';

// DESIGN "Bodies": a body that stops arriving ends with 408. The service's limits are 10 s idle
// and 1 KiB/s after 10 s; this app has short ones, and is spoken to over a real socket.
const LIMITS = { idleMs: 300, minBytesPerSecond: 1024, graceMs: 600 };

let t: TestApp;
let port: number;
let acc: TestAccount;
let widgetKey: string;
beforeAll(async () => {
  t = await startTestApp({
    config: { secretsKey: SECRETS_KEY },
    webchatLimits: { perAddress: 100_000, perVisitor: 100_000 },
    bodyStall: LIMITS,
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as net.AddressInfo).port;
  acc = await newAccount(t);
  widgetKey = (await connectWebchat(acc)).widget_key;
});
afterAll(() => t.close());

interface Answer {
  /** The raw response. */
  text: string;
  status: number;
  /** Whether the service closed the connection (rather than the test giving up after 5 s). */
  closedByService: boolean;
  ms: number;
}

/**
 * Sends a request's head announcing `announced` bytes of body, then `chunks`, one every
 * `everyMs`; waits for the whole answer, then up to a second for the service to close.
 */
function trickle(
  head: { method?: string; path: string; headers: Record<string, string> },
  announced: number,
  chunks: (string | Buffer)[],
  everyMs: number,
): Promise<Answer> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let ms = 0;
    let gaveUp = false;
    const giveUp = (after: number) =>
      setTimeout(() => {
        gaveUp = true;
        socket.destroy();
      }, after);
    let limit = giveUp(5000);
    socket.on('data', (d: Buffer) => {
      text += d.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? NaN);
      if (ms === 0 && end >= 0 && Buffer.byteLength(text.slice(end + 4)) >= length) {
        ms = Date.now() - started;
        clearTimeout(limit);
        limit = giveUp(1000);
      }
    });
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(limit);
      resolve({
        text,
        status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0),
        closedByService: !gaveUp,
        ms: ms || Date.now() - started,
      });
    });
    socket.on('error', reject);
    const lines = Object.entries({ Host: 'x', ...head.headers, 'Content-Length': announced }).map(
      ([k, v]) => `${k}: ${v}`,
    );
    socket.write(`${head.method ?? 'POST'} ${head.path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
    let i = 0;
    const timer = setInterval(() => {
      if (i < chunks.length && !socket.destroyed) socket.write(chunks[i++]!);
      else clearInterval(timer);
    }, everyMs);
  });
}

/** The 408 of a body that stopped, in the envelope, and the connection closed after it. */
function expectStalled(answer: Answer) {
  expect(answer.status, answer.text).toBe(408);
  expect(answer.text).toMatch(/\r\nconnection: close\r\n/i);
  const body = JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4));
  expect(body).toEqual({
    error: { code: 'invalid_request', message: 'the request body stopped arriving' },
  });
  expect(answer.closedByService).toBe(true);
}

const session = () => ({
  path: `/webchat/v1/${widgetKey}/session`,
  headers: { Origin: ORIGIN, 'Content-Type': 'application/json' },
});
const webhook = {
  path: '/channels/chn_01J00000000000000000000000/webhook',
  headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': 'sha256=00' },
};
const importCsv = {
  path: '/v1/contacts/imports',
  headers: { 'Content-Type': 'text/csv' } as Record<string, string>,
};
/** `n` CSV rows of new contacts, `phone,name`. */
const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => `${randomPhone()},Slow ${i}\n`).join('');

describe('a body with no byte for the idle time: 408 within it', () => {
  it('a visitor starting a webchat session (no credential needed)', async () => {
    const answer = await trickle(session(), 100, ['{"tok'], 10);
    expectStalled(answer);
    expect(answer.ms).toBeLessThan(LIMITS.idleMs + 700);
  });

  it("a provider's webhook (no credential needed; the raw bytes are kept)", async () => {
    const answer = await trickle(webhook, 100, ['{"object":"whatsapp_business_'], 10);
    expectStalled(answer);
    expect(answer.ms).toBeLessThan(LIMITS.idleMs + 700);
  });

  it('a JSON route of the API', async () => {
    const answer = await trickle(
      {
        path: '/v1/contacts',
        headers: { Authorization: `Bearer ${acc.apiKey}`, 'Content-Type': 'application/json' },
      },
      100,
      ['{"phone":'],
      10,
    );
    expectStalled(answer);
    const listed = await acc.call({ method: 'GET', url: '/v1/contacts' });
    expect(listed.json().total).toBe(0);
  });

  it('a CSV import: refused, and no import is kept', async () => {
    const answer = await trickle(
      { ...importCsv, headers: { ...importCsv.headers, Authorization: `Bearer ${acc.apiKey}` } },
      10_000,
      [`phone,name\n${rows(3)}`],
      10,
    );
    expectStalled(answer);
    const kept =
      await sql`SELECT id FROM contact_imports WHERE account_id = ${acc.accountId}`.execute(t.db);
    expect(kept.rows).toEqual([]);
  });

  it('an upload (multipart, read by its own reader) under the same limits', async () => {
    const upload = fileUpload(ACCEPTED.pdf.bytes, 'a.pdf');
    const answer = await trickle(
      {
        path: '/v1/media',
        headers: {
          Authorization: `Bearer ${acc.apiKey}`,
          'Content-Type': upload.headers['content-type']!,
        },
      },
      upload.payload.length,
      [upload.payload.subarray(0, 100)],
      10,
    );
    expectStalled(answer);
  });
});

describe('a body that keeps coming, but under the minimum rate after the grace time: 408', () => {
  it('a webchat session dripping 200 bytes a second', async () => {
    // `{}` padded with white space (valid JSON), 10 bytes every 50 ms.
    const chunks = Array.from({ length: 100 }, () => ' '.repeat(10));
    const answer = await trickle(session(), 2 + 1000, ['{', ...chunks, '}'], 50);
    expectStalled(answer);
    expect(answer.ms).toBeGreaterThanOrEqual(LIMITS.graceMs);
  });

  it("a provider's webhook dripping too", async () => {
    const chunks = Array.from({ length: 100 }, () => ' '.repeat(10));
    const answer = await trickle(webhook, 2 + 1000, ['{', ...chunks, '}'], 50);
    expectStalled(answer);
  });
});

describe('a slow but steady body above the minimum rate arrives', () => {
  it('a webchat session sent at 3 KB/s for over a second', async () => {
    const chunks = Array.from({ length: 25 }, () => ' '.repeat(150));
    const answer = await trickle(session(), 2 + 25 * 150, ['{', ...chunks, '}'], 50);
    expect(answer.status, answer.text).toBe(200);
    expect(answer.ms).toBeGreaterThan(LIMITS.graceMs);
    expect(answer.text).toContain('"token":"v1.');
  });

  it('a CSV import sent at about 3 KB/s for over a second is imported whole', async () => {
    const own = await newAccount(t);
    const csv = Buffer.from(`phone,name\n${rows(120)}`);
    const chunks = Array.from({ length: Math.ceil(csv.length / 150) }, (_, i) =>
      csv.subarray(i * 150, i * 150 + 150),
    );
    const answer = await trickle(
      { ...importCsv, headers: { ...importCsv.headers, Authorization: `Bearer ${own.apiKey}` } },
      csv.length,
      chunks,
      50,
    );
    expect(answer.status, answer.text).toBe(202);
    expect(answer.ms).toBeGreaterThan(LIMITS.graceMs);
    const id = JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4)).id as string;
    await t.services.contactImports.settled();
    const report = await own.call({ method: 'GET', url: `/v1/contacts/imports/${id}` });
    expectStatus(report, 200);
    expect(report.json()).toMatchObject({ status: 'completed', created: 120 });
  });

  it('no cap on the whole request: Node’s requestTimeout is off', () => {
    expect(t.app.server.requestTimeout).toBe(0);
  });
});

it('a request answered before its body arrived (no key) closes the connection', async () => {
  const answer = await trickle(
    { path: '/v1/contacts', headers: { 'Content-Type': 'application/json' } },
    1000,
    ['{"phone":'],
    10,
  );
  expect(answer.status, answer.text).toBe(401);
  expect(answer.text).toMatch(/\r\nconnection: close\r\n/i);
  expect(answer.closedByService).toBe(true);
  expect(answer.ms).toBeLessThan(2000);
});

it('a connection carries the next request after a body read through the guard', async () => {
  const body = '{}';
  const request = `POST ${session().path} HTTP/1.1\r\nHost: x\r\nOrigin: ${ORIGIN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const text = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (d: Buffer) => {
      answer += d.toString('utf8');
      if ((answer.match(/HTTP\/1\.1 200 /g) ?? []).length === 2 && answer.endsWith('}'))
        socket.destroy();
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.write(request);
    setTimeout(() => socket.write(request), 100);
    setTimeout(() => socket.destroy(), 3000);
  });
  expect(text.match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
  expect(text).not.toMatch(/connection: close/i);
});
