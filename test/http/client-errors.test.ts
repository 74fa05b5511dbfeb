import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerClientError } from '../../src/http/error-handler.js';
import { newAccount, startTestApp, type TestApp } from '../helpers.js';

/*
 * Requests Node's HTTP parser refuses before Fastify routes them, written byte for byte on a
 * real socket (inject never goes through the parser): each gets the error envelope in a whole
 * HTTP response, and the connection closes.
 */

let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await startTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(() => t.close());

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes `bytes`, reads until the server closes the connection, and parses what came back. */
function exchange(bytes: string | Buffer, to = port): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(to, '127.0.0.1', () => socket.write(bytes));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // A server that closes while the client still writes may reset the connection: what was
    // read before counts.
    socket.on('error', () => undefined);
    socket.setTimeout(5_000, () => {
      socket.destroy();
      reject(new Error(`no close: ${Buffer.concat(chunks).toString('latin1')}`));
    });
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no response: ${JSON.stringify(text)}`));
      const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)?.[1]),
        headers,
        body: text.slice(end + 4),
      });
    });
  });
}

function expectEnvelope(res: RawResponse, status: number) {
  expect(res.status, res.body).toBe(status);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(res.headers.connection).toBe('close');
  expect(Number(res.headers['content-length'])).toBe(Buffer.byteLength(res.body));
  const body = JSON.parse(res.body) as { error: { code: string; message: string } };
  expect(body).toEqual({ error: { code: 'invalid_request', message: expect.any(String) } });
  expect(body.error.message.length).toBeGreaterThan(0);
  return body.error;
}

const get = (target: string, headers = '') =>
  `GET ${target} HTTP/1.1\r\nHost: localhost\r\n${headers}\r\n`;

describe('requests the HTTP parser refuses', () => {
  it('headers or a URL over 16 KB: 431 invalid_request in the envelope, then the connection closes', async () => {
    expectEnvelope(await exchange(get('/v1/contacts', `X-Big: ${'a'.repeat(17_000)}\r\n`)), 431);
    const error = expectEnvelope(await exchange(get(`/v1/contacts?q=${'a'.repeat(17_000)}`)), 431);
    expect(error.message).toMatch(/16 KB/);
  });

  it.each([
    ['an invalid byte in a header value', get('/v1/contacts', 'X-A: a\u0001b\r\n')],
    ['an invalid byte in a header name', get('/v1/contacts', 'X(A): b\r\n')],
    ['a request target without a leading /', get('v1/contacts')],
    ['HTTP/1.2', 'GET /v1/contacts HTTP/1.2\r\nHost: localhost\r\n\r\n'],
    ['an unknown method', 'FOO /v1/contacts HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /v1/contacts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
        'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
    ],
    [
      'a chunk size that is not hexadecimal',
      'POST /v1/contacts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
        'Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    ],
    ['an HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
    ['a bare line feed in the request line', 'GET /v1/contacts HTTP/1.1\nHost: localhost\n\n'],
  ])('%s: 400 invalid_request in the envelope, then the connection closes', async (_case, raw) => {
    expectEnvelope(await exchange(raw), 400);
  });

  it('an Expect other than 100-continue: 417 in the envelope (Node answers it with no body)', async () => {
    const error = expectEnvelope(
      await exchange(
        'POST /v1/contacts HTTP/1.1\r\nHost: localhost\r\nExpect: foo\r\n' +
          'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
      ),
      417,
    );
    expect(error.message).toMatch(/100-continue/);
  });

  it('an HTTP/1.1 request without Host: 400 in the envelope (Node answers it with no body)', async () => {
    const error = expectEnvelope(
      await exchange('GET /v1/contacts HTTP/1.1\r\nConnection: close\r\n\r\n'),
      400,
    );
    expect(error.message).toMatch(/Host/);
    // HTTP/1.0 has no Host to require.
    const old = await exchange('GET /healthz HTTP/1.0\r\n\r\n');
    expect(old.status).toBe(200);
  });

  it('CONNECT: 400 in the envelope (Node closes the connection without a word)', async () => {
    expectEnvelope(
      await exchange('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'),
      400,
    );
  });

  it('leaves the server answering the next connection as usual', async () => {
    await exchange(get('/v1/contacts', 'X-A: a\u0001b\r\n'));
    const res = await exchange(get('/healthz', 'Connection: close\r\n'));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ status: 'ok' });
  });
});

describe('a refused request on a connection that carries another', () => {
  /** Connects, writes `first`, and reads until `until` holds of what came back (5 s at most). */
  async function openAndRead(first: string, until: (text: string) => boolean) {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    const closed = new Promise<string>((resolve) =>
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1'))),
    );
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`timed out: ${Buffer.concat(chunks).toString('latin1')}`));
      }, 5_000);
      socket.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        if (until(Buffer.concat(chunks).toString('latin1'))) {
          clearTimeout(timer);
          resolve();
        }
      });
      socket.on('connect', () => socket.write(first));
    });
    return { socket, closed, received: () => Buffer.concat(chunks).toString('latin1') };
  }

  it('a response already under way is cut off, never followed by a 400 inside its body', async () => {
    const { apiKey } = await newAccount(t);
    // An event stream: its headers are sent at once, and its body runs until the connection ends.
    const conn = await openAndRead(
      get('/v1/events/stream', `Authorization: Bearer ${apiKey}\r\n`),
      (text) => text.includes('retry:'),
    );
    const before = conn.received();
    expect(before).toMatch(/^HTTP\/1\.1 200 /);
    conn.socket.write(get('/v1/contacts', 'X-A: a\u0001b\r\n'));
    const all = await conn.closed;
    // What came is the stream and only the stream: no second status line spliced into it.
    expect(all.startsWith(before)).toBe(true);
    expect(all.slice(before.length)).not.toMatch(/HTTP\/1\.1/);
    expect(all.match(/HTTP\/1\.1 /g)).toHaveLength(1);
  });

  it('a response already sent whole arrives intact, and the refusal follows it', async () => {
    const conn = await openAndRead(get('/healthz'), (text) => text.includes('{"status":"ok"}'));
    const first = conn.received();
    conn.socket.write(get('/v1/contacts', 'X-A: a\u0001b\r\n'));
    const all = await conn.closed;
    expect(all.startsWith(first)).toBe(true);
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    expect(all.slice(first.length)).toMatch(/^HTTP\/1\.1 400 /);
  });
});

describe('the log of a refused request', () => {
  it("holds the parser's code and reason, never the raw bytes (which carry credentials)", async () => {
    const lines: string[] = [];
    const capture = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString('utf8'));
        done();
      },
    });
    // The logger as the app configures it, at debug, with Fastify's serializers.
    const app = Fastify({
      logger: { level: 'debug', stream: capture },
      clientErrorHandler: answerClientError,
    });
    try {
      await app.listen({ port: 0, host: '127.0.0.1' });
      const own = (app.server.address() as AddressInfo).port;
      const apiKey = 'sk_test_secretsecretsecret0123456789';
      const visitorToken = 'vt_secretvisitortoken0123456789';
      const res = await exchange(
        `GET /v1/contacts?token=${visitorToken} HTTP/1.1\r\nHost: localhost\r\n` +
          `Authorization: Bearer ${apiKey}\r\nX-A: a\u0001b\r\n\r\n`,
        own,
      );
      expect(res.status).toBe(400);
      const output = lines.join('');
      const entry = lines
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.msg === 'malformed HTTP request');
      expect(entry, output).toBeDefined();
      expect(entry).toMatchObject({ code: expect.stringMatching(/^HPE_/) });
      for (const secret of [apiKey, visitorToken]) {
        expect(output).not.toContain(secret);
        // A Buffer is logged as its bytes, in decimal: the secret must not be there either.
        expect(output).not.toContain([...Buffer.from(secret)].join(','));
      }
      expect(output).not.toContain('rawPacket');
    } finally {
      await app.close();
    }
  });
});
