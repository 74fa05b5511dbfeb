import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraphClient, GraphError } from '../../src/channels/meta/graph-client.js';
import { trackTimers } from '../live-timers.js';

let server: http.Server;
let port: number;
beforeAll(async () => {
  server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png' });
    res.end(Buffer.from('png bytes'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('GraphClient.download', () => {
  it('refuses a download URL whose host resolves to a private address, checked at connect time', async () => {
    const graph = new GraphClient({ baseUrl: 'http://127.0.0.1:1', version: 'v23.0' });
    try {
      const err = await graph
        .download(`http://localhost:${port}/media/1`, { token: 't', maxBytes: 1024 })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GraphError);
      expect((err as GraphError).message).toMatch(/private or reserved address/);
    } finally {
      await graph.close();
    }
  });

  it('downloads from a private address only with ALLOW_PRIVATE_TARGETS, within the size cap', async () => {
    const graph = new GraphClient({
      baseUrl: 'http://127.0.0.1:1',
      version: 'v23.0',
      allowPrivateDownloads: true,
    });
    try {
      const file = await graph.download(`http://localhost:${port}/media/1`, {
        token: 't',
        maxBytes: 1024,
      });
      expect(file).toEqual({ bytes: Buffer.from('png bytes'), contentType: 'image/png' });
      const tooBig = await graph
        .download(`http://localhost:${port}/media/1`, { token: 't', maxBytes: 4 })
        .catch((e: unknown) => e);
      expect((tooBig as GraphError).httpStatus).toBe(413);
    } finally {
      await graph.close();
    }
  });
});

describe('GraphClient.call', () => {
  it('leaves no timer behind an answered call (the agent bounds it, not a timer per call)', async () => {
    const api = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"messages":[{"id":"wamid.1"}]}');
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    const graph = new GraphClient({
      baseUrl: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
      version: 'v23.0',
    });
    const timers = trackTimers();
    try {
      const started = Date.now();
      for (let i = 0; i < 60; i++) {
        await expect(
          graph.call('POST', '1/messages', { token: 't', json: { to: '1' } }),
        ).resolves.toEqual({ messages: [{ id: 'wamid.1' }] });
      }
      // One deadline per second the calls spanned (shared by that second's calls), and
      // undici's own coarse timers (a few for every connection); 60 were not left behind.
      const seconds = Math.ceil((Date.now() - started) / 1_000) + 1;
      expect(timers.pending()).toBeLessThanOrEqual(seconds + 4);
    } finally {
      timers.stop();
      await graph.close();
      await new Promise<void>((resolve) => api.close(() => resolve()));
    }
  });

  it('cuts a call at its deadline, waiting for a connection included (a body trickling in, a full pool)', async () => {
    // Headers at once, then a byte every 100 ms for 5 s: no header or body timeout ever fires.
    const trickle = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => res.write(' '), 100);
      setTimeout(() => {
        clearInterval(timer);
        res.end('{}');
      }, 5_000);
      res.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => trickle.listen(0, '127.0.0.1', resolve));
    const graph = new GraphClient({
      baseUrl: `http://127.0.0.1:${(trickle.address() as AddressInfo).port}`,
      version: 'v23.0',
      timeoutMs: 300,
      connections: 1,
    });
    try {
      const began = Date.now();
      // The second waits for the only connection, which the first holds.
      const outcomes = await Promise.all(
        [1, 2].map((n) =>
          graph.call('POST', `${n}/messages`, { token: 't', json: {} }).catch((e: unknown) => e),
        ),
      );
      for (const err of outcomes) {
        expect(err).toBeInstanceOf(GraphError);
        expect((err as GraphError).message).toBe('Graph did not answer in time');
      }
      expect(Date.now() - began).toBeLessThan(2_500);
    } finally {
      await graph.close();
      trickle.closeAllConnections();
      await new Promise<void>((resolve) => trickle.close(() => resolve()));
    }
  });
});
