/**
 * The webhook receiver of the webhooks suite: an HTTPS server (the test CA's certificate for
 * localhost, test/fixtures/tls) that answers every POST 204 at once and records, per
 * `X-Service-Event-Id`, when it arrived (the request's head, wall clock with sub-millisecond
 * precision) and the event's `timestamp`. Run as a child of the harness
 * (`node --import tsx bench/lib/webhook-receiver.ts`, with an IPC channel): it sends
 * `{"type":"ready","port":N}` once listening on 127.0.0.1 (and ::1 when there is one, since
 * `localhost` may resolve to either), answers the harness's commands over IPC, and exits on
 * SIGTERM/SIGINT or when the harness goes away.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

export type ReceiverCommand =
  | { id: number; cmd: 'secret'; secret: string }
  | { id: number; cmd: 'stats' }
  | { id: number; cmd: 'dump' }
  | { id: number; cmd: 'reset' };

export interface ReceiverStats {
  /** Distinct events recorded. */
  events: number;
  /** Requests received (retries and duplicates included). */
  requests: number;
  duplicates: number;
  /** Requests without an event id or a parsable timestamp. */
  malformed: number;
  /** Requests whose X-Service-Signature did not match (only once a secret is set). */
  badSignatures: number;
  /** Epoch ms of the first and last recorded arrival; NaN before the first. */
  firstArrival: number;
  lastArrival: number;
}

/** Per recorded event, in arrival order: its id, arrival and `timestamp` (epoch ms). */
export interface ReceiverDump {
  ids: string[];
  arrivals: number[];
  timestamps: number[];
}

const MAX_EVENTS = 5_000_000;

function main(): void {
  const tlsDir = process.env.BENCH_TLS_DIR;
  if (!tlsDir || !process.send) {
    process.stderr.write('webhook-receiver: needs BENCH_TLS_DIR and an IPC channel\n');
    process.exit(2);
  }
  const send = (msg: unknown) => process.send?.(msg);
  const tls = {
    key: readFileSync(path.join(tlsDir, 'server.key')),
    cert: readFileSync(path.join(tlsDir, 'server.pem')),
  };

  let secret: string | null = null;
  let seen = new Set<string>();
  let dump: ReceiverDump = { ids: [], arrivals: [], timestamps: [] };
  const fresh = (): ReceiverStats => ({
    events: 0,
    requests: 0,
    duplicates: 0,
    malformed: 0,
    badSignatures: 0,
    firstArrival: NaN,
    lastArrival: NaN,
  });
  let stats = fresh();

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const arrival = performance.timeOrigin + performance.now();
    const counted = stats; // a reset meanwhile starts a new count
    counted.requests++;
    res.writeHead(204).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (counted !== stats) return;
      const body = Buffer.concat(chunks);
      const id = req.headers['x-service-event-id'];
      if (secret !== null) {
        const expected = createHmac('sha256', secret).update(body).digest();
        const given = Buffer.from(String(req.headers['x-service-signature'] ?? ''), 'hex');
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
          stats.badSignatures++;
        }
      }
      let timestamp = NaN;
      try {
        timestamp = Date.parse(
          String((JSON.parse(body.toString('utf8')) as { timestamp?: unknown }).timestamp),
        );
      } catch {
        // counted below
      }
      if (typeof id !== 'string' || Number.isNaN(timestamp)) {
        stats.malformed++;
        return;
      }
      if (seen.has(id)) {
        stats.duplicates++;
        return;
      }
      if (seen.size >= MAX_EVENTS) return;
      seen.add(id);
      dump.ids.push(id);
      dump.arrivals.push(arrival);
      dump.timestamps.push(timestamp);
      stats.events++;
      if (Number.isNaN(stats.firstArrival) || arrival < stats.firstArrival)
        stats.firstArrival = arrival;
      if (Number.isNaN(stats.lastArrival) || arrival > stats.lastArrival)
        stats.lastArrival = arrival;
    });
  };

  const servers: https.Server[] = [];
  const close = () => {
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
    setTimeout(() => process.exit(0), 2_000).unref();
  };
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
  process.on('disconnect', close);

  process.on('message', (raw: ReceiverCommand) => {
    switch (raw.cmd) {
      case 'secret':
        secret = raw.secret;
        send({ id: raw.id, ok: true });
        break;
      case 'stats':
        send({ id: raw.id, stats });
        break;
      case 'dump':
        send({ id: raw.id, dump });
        break;
      case 'reset':
        seen = new Set();
        dump = { ids: [], arrivals: [], timestamps: [] };
        stats = fresh();
        send({ id: raw.id, ok: true });
        break;
    }
  });

  const v4 = https.createServer({ ...tls, keepAliveTimeout: 60_000 }, handle);
  servers.push(v4);
  v4.listen(0, '127.0.0.1', () => {
    const { port } = v4.address() as AddressInfo;
    const v6 = https.createServer({ ...tls, keepAliveTimeout: 60_000 }, handle);
    const ready = () => send({ type: 'ready', port });
    v6.once('error', ready); // no IPv6 loopback here: 127.0.0.1 alone
    v6.listen(port, '::1', () => {
      servers.push(v6);
      ready();
    });
  });
}

main();
