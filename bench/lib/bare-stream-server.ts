/**
 * The streams suite's baseline: a bare Fastify server holding Server-Sent Events streams, with
 * what a reply to a widget needs and nothing else. `GET /stream?id=N` opens stream N (an
 * `event: ready` at once); `POST /push` `{ id, content }` writes `event: message` with that
 * content to stream N and answers 201. No auth, no database, no logging. Run as a child of the
 * harness (`node --import tsx bench/lib/bare-stream-server.ts`): it prints `{"port":N}` once
 * listening on 127.0.0.1 and exits on SIGTERM/SIGINT or when its stdin closes.
 */
import type { ServerResponse } from 'node:http';
import Fastify from 'fastify';
import { serveAsChild } from './child-server.js';

const streams = new Map<string, ServerResponse>();
const app = Fastify({ logger: false });

app.get('/stream', (request, reply) => {
  const id = (request.query as { id?: string }).id ?? '';
  reply.hijack();
  reply.raw.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    Connection: 'keep-alive',
  });
  reply.raw.write('retry: 1000\nevent: ready\ndata: {}\n\n');
  streams.set(id, reply.raw);
  reply.raw.on('close', () => {
    if (streams.get(id) === reply.raw) streams.delete(id);
  });
});

app.post('/push', async (request, reply) => {
  const { id, content } = request.body as { id: string; content: string };
  const stream = streams.get(String(id));
  if (!stream) return reply.code(404).send({ error: 'no such stream' });
  const message = { id: `msg_${Date.now()}`, author: 'team', type: 'text', content };
  stream.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  return reply.code(201).send(message);
});

await app.ready();
serveAsChild(app.server, () => {
  for (const stream of streams.values()) stream.destroy();
  return app.close();
});
