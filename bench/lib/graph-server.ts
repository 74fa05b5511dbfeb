/**
 * A lean fake of Meta's Graph API for the benchmarks (the test suite's test/fake-graph keeps
 * every request it receives, which a run of hundreds of thousands of sends cannot afford).
 * It answers only what the WhatsApp benchmarks use, in Meta's shapes:
 * - `GET /{version}/{phone_number_id}` (the credential check when a channel is connected);
 * - `POST /{version}/{phone_number_id}/messages` (a send):
 *   `{ messaging_product, contacts: [{ input, wa_id }], messages: [{ id: "wamid.…" }] }`;
 * - Graph's error envelope for a missing or unknown token (190) and an unknown object (100/33).
 * It counts what it answered instead of recording it. Harness controls, outside Graph's paths:
 * `PUT /_bench/phone-numbers/{id}` registers a phone number and its token, `GET /_bench/stats`,
 * `POST /_bench/reset` (the counts). With BENCH_GRAPH_KEYED=1 it also keeps, per recipient and
 * content (`to`, type and payload), the times it answered a send of it, which
 * `GET /_bench/sends` returns: a message Graph took twice shows as two times under one key.
 *
 * Run as a child of the harness (`node --import tsx bench/lib/graph-server.ts`): it prints
 * `{"port":N}` once listening on 127.0.0.1 and exits on SIGTERM/SIGINT or when its stdin
 * closes (the harness died).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { serveAsChild } from './child-server.js';

export interface GraphPhoneNumber {
  token: string;
  business_account_id: string;
  display_phone_number: string;
  verified_name: string;
}

export interface GraphStats {
  /** Sends answered with a message id. */
  sent: number;
  /** Credential checks (`GET /{phone_number_id}`) answered. */
  checks: number;
  /** Requests refused: no token, an unknown token, a token of another number. */
  refused: number;
  /** Sends whose body Graph would refuse (answered with its `(#100)` error). */
  invalid: number;
  /** Anything else (unknown paths and methods). */
  other: number;
}

/** Per `${to} ${type} ${payload JSON}`, the epoch ms of every send answered (BENCH_GRAPH_KEYED=1). */
export type GraphSends = Record<string, number[]>;

const VERSION = /^v\d+\.\d+$/;
const SEND_TYPES = new Set(['text', 'template', 'image', 'document']);
const MAX_BODY_BYTES = 1024 * 1024;

function main(): void {
  const phones = new Map<string, GraphPhoneNumber>();
  const fresh = (): GraphStats => ({ sent: 0, checks: 0, refused: 0, invalid: 0, other: 0 });
  let stats = fresh();
  const keyed = process.env.BENCH_GRAPH_KEYED === '1';
  let sends = new Map<string, number[]>();
  // Unique per process and send: a prefix of random bytes, then a counter.
  const wamidPrefix = randomBytes(9).toString('hex');
  let seq = 0;

  const reply = (res: http.ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json; charset=UTF-8',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  };
  const graphError = (
    res: http.ServerResponse,
    status: number,
    error: { code: number; message: string } & Record<string, unknown>,
  ) =>
    reply(res, status, {
      error: { type: 'OAuthException', ...error, fbtrace_id: randomBytes(8).toString('base64url') },
    });
  const invalid = (res: http.ServerResponse, details: string) => {
    stats.invalid++;
    graphError(res, 400, {
      code: 100,
      message: '(#100) Invalid parameter',
      error_data: { messaging_product: 'whatsapp', details },
    });
  };

  const control = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    raw: string,
  ) => {
    if (req.method === 'GET' && path === '/_bench/stats') return reply(res, 200, stats);
    if (req.method === 'GET' && path === '/_bench/sends')
      return reply(res, 200, Object.fromEntries(sends));
    if (req.method === 'POST' && path === '/_bench/reset') {
      stats = fresh();
      sends = new Map();
      return reply(res, 200, stats);
    }
    const phone = /^\/_bench\/phone-numbers\/(\d+)$/.exec(path);
    if (req.method === 'PUT' && phone) {
      const asset = JSON.parse(raw) as GraphPhoneNumber;
      phones.set(phone[1]!, asset);
      return reply(res, 200, { id: phone[1] });
    }
    return reply(res, 404, { error: 'unknown control' });
  };

  const send = (res: http.ServerResponse, raw: string) => {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return invalid(res, 'Request body must be JSON');
    }
    if (body === null || typeof body !== 'object')
      return invalid(res, 'Request body must be an object');
    if (body.messaging_product !== 'whatsapp')
      return invalid(res, "The parameter messaging_product is required and must be 'whatsapp'.");
    const to = body.to;
    if (typeof to !== 'string' || !/^\+?\d{6,15}$/.test(to))
      return invalid(res, 'The parameter to must be a phone number (digits, with country code).');
    const type = body.type ?? 'text';
    if (typeof type !== 'string' || !SEND_TYPES.has(type))
      return invalid(res, 'The parameter type is not one of the allowed values.');
    const payload = body[type] as Record<string, unknown> | undefined;
    if (!payload || typeof payload !== 'object')
      return invalid(res, `The parameter ${type} is required.`);
    if (type === 'template') {
      const language = payload.language as { code?: unknown } | undefined;
      if (typeof payload.name !== 'string' || typeof language?.code !== 'string')
        return invalid(
          res,
          "The parameters template['name'] and template['language']['code'] are required.",
        );
    }
    stats.sent++;
    seq++;
    if (keyed) {
      const key = `${to} ${type} ${JSON.stringify(payload)}`;
      const times = sends.get(key);
      if (times) times.push(Date.now());
      else sends.set(key, [Date.now()]);
    }
    reply(res, 200, {
      messaging_product: 'whatsapp',
      contacts: [{ input: to, wa_id: to.replace(/^\+/, '') }],
      messages: [{ id: `wamid.${Buffer.from(`${wamidPrefix}:${seq}`).toString('base64')}` }],
    });
  };

  const route = (req: http.IncomingMessage, res: http.ServerResponse, raw: string) => {
    const url = new URL(req.url ?? '/', 'http://graph');
    if (url.pathname.startsWith('/_bench/')) return control(req, res, url.pathname, raw);
    const [version, id = '', edge, ...rest] = url.pathname.split('/').filter(Boolean);
    if (!version || !VERSION.test(version) || rest.length > 0) {
      stats.other++;
      return graphError(res, 400, {
        code: 2500,
        message: `Unknown path components: ${url.pathname}`,
      });
    }
    const auth = req.headers.authorization;
    const token = typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7) : null;
    if (token === null) {
      stats.refused++;
      return graphError(res, 400, {
        code: 104,
        message: 'An access token is required to request this resource.',
      });
    }
    const phone = phones.get(id);
    if (!phone || phone.token !== token) {
      stats.refused++;
      // Graph answers 190 for a token it does not know at all, 100/33 for one that may not see the object.
      const known = [...phones.values()].some((p) => p.token === token);
      return known
        ? graphError(res, 400, {
            code: 100,
            error_subcode: 33,
            type: 'GraphMethodException',
            message: `Unsupported ${req.method?.toLowerCase() ?? ''} request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
          })
        : graphError(res, 401, {
            code: 190,
            message: 'Invalid OAuth access token - Cannot parse access token',
          });
    }
    if (req.method === 'POST' && edge === 'messages') return send(res, raw);
    if (req.method === 'GET' && edge === undefined) {
      stats.checks++;
      const full: Record<string, unknown> = {
        verified_name: phone.verified_name,
        code_verification_status: 'VERIFIED',
        display_phone_number: phone.display_phone_number,
        quality_rating: 'GREEN',
        platform_type: 'CLOUD_API',
        throughput: { level: 'STANDARD' },
      };
      const fields = url.searchParams.get('fields');
      const picked: Record<string, unknown> = {};
      for (const f of fields ? fields.split(',') : Object.keys(full)) picked[f] = full[f];
      return reply(res, 200, { ...picked, id });
    }
    stats.other++;
    return graphError(res, 400, {
      code: 100,
      error_subcode: 33,
      type: 'GraphMethodException',
      message: `Unsupported ${req.method?.toLowerCase() ?? ''} request.`,
    });
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY_BYTES) chunks.push(c);
    });
    req.on('end', () => {
      if (size > MAX_BODY_BYTES)
        return graphError(res, 413, { code: 1, message: 'Body too large' });
      route(req, res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  // Keep-alive sockets of the service's client pool stay open between bursts.
  server.keepAliveTimeout = 60_000;

  serveAsChild(
    server,
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
}

main();
