import dns from 'node:dns';
import https from 'node:https';
import net from 'node:net';
import type { LookupFunction } from 'node:net';
import { isPrivateAddress } from './address-guard.js';

export interface GuardedRequest {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: Buffer | string;
  /** Whole request, connect to last byte. */
  timeoutMs: number;
  /** Response bodies beyond this are cut off and the request fails. */
  maxBytes: number;
  /** 0 refuses redirects; each hop is checked like the first. */
  maxRedirects: number;
  allowPrivate: boolean;
  /** Reuse connections (webhook delivery); each new connection still goes through the guard. */
  agent?: https.Agent;
  /** Read and drop the response body (only the status matters)... */
  discardBody?: boolean;
  /** ...but keep its first this many bytes in `body` (a log's excerpt). */
  keepBytes?: number;
}

export interface GuardedResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  url: string;
}

/**
 * Why a request to a user-supplied URL did not get a response; the message is safe to show.
 * `no_response` is every failure before a response began (the name did not resolve, the
 * connection was refused, reset or unreachable, TLS failed, or nothing came in time) in one
 * wording, so that the URL's owner cannot map the ports of hosts we reach by telling them apart.
 */
export class OutboundError extends Error {
  constructor(
    message: string,
    readonly kind: 'refused' | 'no_response' | 'incomplete' | 'too_large' | 'redirect',
  ) {
    super(message);
  }
}

/**
 * What a failure of the connection or the exchange is reported as: the guard's and the size
 * limit's own errors stay; anything else is `no_response` until a response began (its status
 * line read), `incomplete` after.
 */
function outboundError(err: Error, responded: boolean, timeoutMs: number): OutboundError {
  if (err instanceof OutboundError) return err;
  return responded
    ? new OutboundError(
        `the response broke off or did not complete within ${timeoutMs} ms`,
        'incomplete',
      )
    : new OutboundError(
        `no response: the connection failed or nothing came within ${timeoutMs} ms`,
        'no_response',
      );
}

/**
 * Checks the addresses a host name resolves to at connect time, so the address checked is the
 * address connected to (a DNS answer that changes between check and use cannot slip through).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses;
      const allowed = allowPrivate ? list : list.filter((a) => !isPrivateAddress(a.address));
      if (allowed.length === 0) {
        const e = new OutboundError(
          `${hostname} resolves to a private or reserved address`,
          'refused',
        );
        return callback(e, '', 0);
      }
      if ((options as { all?: boolean }).all) return callback(null, allowed, 0);
      return callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}

function checkUrl(raw: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundError('not a valid URL', 'refused');
  }
  if (url.protocol !== 'https:')
    throw new OutboundError('only https:// URLs are allowed', 'refused');
  if (url.username || url.password)
    throw new OutboundError('URLs with credentials are not allowed', 'refused');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // An IP literal is connected to without a lookup, so it is checked here.
  if (net.isIP(host) && !allowPrivate && isPrivateAddress(host)) {
    throw new OutboundError(`${host} is a private or reserved address`, 'refused');
  }
  return url;
}

function once(req: GuardedRequest, url: URL): Promise<GuardedResponse> {
  return new Promise((resolve, reject) => {
    let responded = false;
    const fail = (err: Error) => reject(outboundError(err, responded, req.timeoutMs));
    const request = https.request(
      url,
      {
        method: req.method ?? 'GET',
        headers: req.headers,
        lookup: guardedLookup(req.allowPrivate),
        timeout: req.timeoutMs,
        agent: req.agent ?? false,
      },
      (res) => {
        responded = true;
        // Refused before reading when the server announces too much; the count below still
        // holds for bodies without (or lying about) a length, so at most maxBytes are buffered.
        const announced = Number(res.headers['content-length']);
        if (!req.discardBody && Number.isFinite(announced) && announced > req.maxBytes) {
          request.destroy(
            new OutboundError(`response is larger than ${req.maxBytes} bytes`, 'too_large'),
          );
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          if (req.discardBody) {
            const room = (req.keepBytes ?? 0) - size;
            if (room > 0) {
              chunks.push(chunk.subarray(0, room));
              size += Math.min(room, chunk.length);
            }
            return;
          }
          size += chunk.length;
          if (size > req.maxBytes) {
            request.destroy(
              new OutboundError(`response is larger than ${req.maxBytes} bytes`, 'too_large'),
            );
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            url: url.href,
          }),
        );
        res.on('error', fail);
      },
    );
    const deadline = setTimeout(
      () => request.destroy(new Error('no complete response in time')),
      req.timeoutMs,
    );
    request.on('close', () => clearTimeout(deadline));
    request.on('timeout', () => request.destroy(new Error('no response in time')));
    request.on('error', fail);
    request.end(req.body);
  });
}

/** An HTTPS request to a user-supplied URL, refused for private targets unless allowed. */
export async function guardedFetch(req: GuardedRequest): Promise<GuardedResponse> {
  let url = checkUrl(req.url, req.allowPrivate);
  for (let hop = 0; ; hop++) {
    const res = await once(req, url);
    const location = res.headers.location;
    if (res.status < 300 || res.status >= 400 || typeof location !== 'string') return res;
    if (hop >= req.maxRedirects) {
      if (req.maxRedirects === 0) return res;
      throw new OutboundError(`more than ${req.maxRedirects} redirects`, 'redirect');
    }
    url = checkUrl(new URL(location, url).href, req.allowPrivate);
  }
}
