import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const tls = {
  key: readFileSync(new URL('./fixtures/tls/server.key', import.meta.url)),
  cert: readFileSync(new URL('./fixtures/tls/server.pem', import.meta.url)),
};

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The exact bytes received. */
  body: Buffer;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  delayMs?: number;
}

/**
 * A real local HTTPS server (certificate from the test CA) that records every request's raw
 * bytes and answers what the test tells it to.
 */
export async function startHttpsServer(
  respond: (req: RecordedRequest) => Reply = () => ({ status: 200 }),
) {
  const requests: RecordedRequest[] = [];
  const server = https.createServer(tls, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const recorded = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      requests.push(recorded);
      const reply = respond(recorded);
      setTimeout(() => {
        res.writeHead(reply.status, reply.headers);
        res.end(reply.body);
      }, reply.delayMs ?? 0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    requests,
    port,
    /** A URL on this server; `localhost` matches the certificate. */
    url: (path = '/') => `https://localhost:${port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
