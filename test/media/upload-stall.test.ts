import multipart from '@fastify/multipart';
import Fastify, { type FastifyInstance } from 'fastify';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { readUpload } from '../../src/media/upload-reader.js';
import { ACCEPTED, fileUpload } from './sample-files.js';

// The reader with short limits (the service's are 10 s), behind a real socket.
let app: FastifyInstance;
let port: number;
beforeAll(async () => {
  app = Fastify();
  await app.register(multipart, { throwFileSizeLimit: true });
  app.setErrorHandler((err: Error, _req, reply) =>
    reply.code(err instanceof AppError ? err.status : 500).send({ message: err.message }),
  );
  app.post('/upload', async (req) => {
    const upload = await readUpload(req, 1024 * 1024, {
      idleMs: 300,
      minBytesPerSecond: 1024,
      graceMs: 600,
    });
    return { size: upload.bytes.length, sha256: upload.sha256 };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as net.AddressInfo).port;
});
afterAll(() => app.close());

/** Sends the head and `chunks` of a body announced whole, one every `everyMs`; the raw answer. */
function trickle(chunks: Buffer[], announced: number, everyMs: number, type: string) {
  return new Promise<string>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (d: Buffer) => {
      answer += d.toString('utf8');
      // The answer is a small JSON object: once it is whole, nothing more is awaited.
      if (answer.includes('\r\n\r\n') && answer.endsWith('}')) socket.destroy();
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.write(
      `POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: ${announced}\r\n\r\n`,
    );
    let i = 0;
    const timer = setInterval(() => {
      if (i < chunks.length && !socket.destroyed) socket.write(chunks[i++]!);
      else clearInterval(timer);
    }, everyMs);
    setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
    }, 5000);
  });
}

describe('a body that stops arriving ends with 408', () => {
  const body = fileUpload(Buffer.concat([ACCEPTED.pdf.bytes, Buffer.alloc(4000, 0x20)]), 'a.pdf');
  const type = body.headers['content-type']!;

  it('no byte for the idle time: 408', async () => {
    const answer = await trickle([body.payload.subarray(0, 200)], body.payload.length, 10, type);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('the request body stopped arriving');
  });

  it('bytes still coming, but too slowly after the grace time: 408', async () => {
    const chunks = Array.from({ length: 40 }, (_, i) => body.payload.subarray(i * 10, i * 10 + 10));
    const answer = await trickle(chunks, body.payload.length, 50, type);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('a body sent at once is read', async () => {
    const answer = await trickle([body.payload], body.payload.length, 1, type);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain(`"size":${ACCEPTED.pdf.bytes.length + 4000}`);
  });
});
