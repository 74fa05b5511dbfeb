import { Agent, errors as undiciErrors, request } from 'undici';
import { DeadlineSignals } from '../../net/deadline-signals.js';
import { guardedLookup } from '../../net/guarded-fetch.js';

/**
 * Graph's error envelope: `{ error: { message, type, code, error_subcode, error_user_title,
 * error_user_msg, error_data, fbtrace_id } }`. We act on `code` (and the HTTP status), never on
 * the message text.
 */
export class GraphError extends Error {
  constructor(
    message: string,
    /** The HTTP status; 0 when no response came (timeout, refused connection). */
    readonly httpStatus: number,
    /** Graph's `error.code`; null when the answer was not Graph's envelope. */
    readonly code: number | null,
    readonly subcode: number | null = null,
    readonly type: string | null = null,
    /** From `Retry-After`, when Graph (or a proxy) sent one. */
    readonly retryAfterMs: number | null = null,
    /** Graph's own details (`error.error_data.details`), for people to read. */
    readonly details: string | null = null,
  ) {
    super(message);
  }

  /** `(#131026) Message undeliverable`-style text: the code first, as Meta's docs name errors. */
  describe(): string {
    const text = this.details ? `${this.message}: ${this.details}` : this.message;
    return this.code === null ? text : `(#${this.code}) ${text}`;
  }
}

/** Graph error codes that mean "slow down": retried after a pause. */
export const THROTTLING_CODES: ReadonlySet<number> = new Set([4, 80007, 130429, 131056]);
/** Graph's "this token is not valid" codes (expired, revoked, unparsable): our credentials are at fault. */
export const TOKEN_CODES: ReadonlySet<number> = new Set([102, 190]);
/** Graph error codes that mean "try again": a temporary fault on Meta's side. */
export const TRANSIENT_CODES: ReadonlySet<number> = new Set([1, 2]);

/** How a failed Graph call should be treated: by `error.code` and the HTTP status alone. */
export function classifyGraphError(err: GraphError): 'throttled' | 'transient' | 'final' {
  if (err.code !== null && THROTTLING_CODES.has(err.code)) return 'throttled';
  if (err.code !== null && TRANSIENT_CODES.has(err.code)) return 'transient';
  if (err.httpStatus === 0 || err.httpStatus >= 500 || err.httpStatus === 429) return 'transient';
  return 'final';
}

export interface GraphClientOptions {
  /** META_GRAPH_URL, no trailing slash. */
  baseUrl: string;
  /** META_GRAPH_VERSION, as `v23.0`. */
  version: string;
  /**
   * How long a call may take in all, waiting for a connection included: it is cut between this
   * and a second more after it began (calls share their deadlines, see DeadlineSignals), well
   * inside a send job's 60 s lease.
   */
  timeoutMs?: number;
  /** Connections kept open to Graph per origin. */
  connections?: number;
  /**
   * ALLOW_PRIVATE_TARGETS: lets downloads reach private addresses (development and tests). By
   * default a download URL (which Graph hands out, so not ours to trust) is refused when its
   * host resolves to a private, loopback or link-local address, checked on the address actually
   * connected to.
   */
  allowPrivateDownloads?: boolean;
}

function retryAfterMs(header: string | string[] | undefined): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/**
 * Meta's Graph API over kept-alive connections. META_GRAPH_URL is the operator's setting, not a
 * user's URL, so these calls do not go through the private-address guard (tests point it at a
 * fake on loopback); media URLs that Graph hands out do (see the inbound media download).
 */
export class GraphClient {
  private readonly agent: Agent;
  /** Downloads go through their own connections, each address checked as it is connected to. */
  private readonly downloads: Agent;
  private readonly timeoutMs: number;
  /** Every call's overall deadline, queueing for a connection included. */
  private readonly deadlines: DeadlineSignals;

  constructor(private readonly opts: GraphClientOptions) {
    this.timeoutMs = opts.timeoutMs ?? 20_000;
    this.deadlines = new DeadlineSignals(this.timeoutMs);
    this.agent = new Agent({
      connections: opts.connections ?? 128,
      keepAliveTimeout: 30_000,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
    this.downloads = new Agent({
      connections: 16,
      keepAliveTimeout: 10_000,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      connect: { lookup: guardedLookup(opts.allowPrivateDownloads ?? false) },
    });
  }

  /** `{graph}/{version}/{path}`: the full URL of a Graph path such as `123/messages`. */
  url(path: string, query?: Record<string, string>): string {
    const qs = query ? `?${new URLSearchParams(query).toString()}` : '';
    return `${this.opts.baseUrl}/${this.opts.version}/${path.replace(/^\/+/, '')}${qs}`;
  }

  /**
   * One Graph call with the bearer token; resolves with the parsed JSON of a 2xx answer and
   * throws a GraphError for anything else (including no answer in time).
   */
  async call<T = unknown>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    opts: {
      token: string;
      json?: unknown;
      query?: Record<string, string>;
      signal?: AbortSignal;
    },
  ): Promise<T> {
    const body = opts.json === undefined ? undefined : JSON.stringify(opts.json);
    const headers: Record<string, string> = { authorization: `Bearer ${opts.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    // The deadline is shared with the calls started in the same second (see DeadlineSignals):
    // it counts the wait for one of the agent's connections too, which its header and body
    // timeouts do not.
    const deadline = this.deadlines.signal();
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
    let res;
    try {
      res = await request(this.url(path, opts.query), {
        method,
        headers,
        body,
        signal,
        dispatcher: this.agent,
      });
    } catch (err) {
      throw new GraphError(describeNetworkError(err), 0, null);
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw new GraphError(describeNetworkError(err), 0, null);
    }
    let parsed: unknown = undefined;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      // Not JSON: judged by the status below.
    }
    if (res.statusCode >= 200 && res.statusCode < 300 && parsed !== undefined) return parsed as T;
    throw toGraphError(res.statusCode, parsed, retryAfterMs(res.headers['retry-after']));
  }

  /**
   * Downloads a file Graph pointed to (WhatsApp media URLs need the token too; Messenger and
   * Instagram attachment URLs are signed and get none), up to `maxBytes`.
   * `url` is absolute; the caller decides whether it may be fetched at all.
   */
  async download(
    url: string,
    opts: { token: string | null; maxBytes: number; signal?: AbortSignal },
  ): Promise<{ bytes: Buffer; contentType: string | null }> {
    const deadline = this.deadlines.signal();
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
    let res;
    try {
      res = await request(url, {
        method: 'GET',
        headers: opts.token === null ? {} : { authorization: `Bearer ${opts.token}` },
        signal,
        dispatcher: this.downloads,
        maxRedirections: 0,
      } as Parameters<typeof request>[1]);
    } catch (err) {
      throw new GraphError(describeNetworkError(err), 0, null);
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await res.body.text().catch(() => '');
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      throw toGraphError(res.statusCode, parsed, retryAfterMs(res.headers['retry-after']));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > opts.maxBytes) {
        res.body.destroy();
        throw new GraphError(`media larger than ${opts.maxBytes} bytes`, 413, null);
      }
      chunks.push(chunk as Buffer);
    }
    const type = res.headers['content-type'];
    return {
      bytes: Buffer.concat(chunks),
      contentType: (Array.isArray(type) ? type[0] : type) ?? null,
    };
  }

  async close(): Promise<void> {
    await Promise.all([this.agent.close(), this.downloads.close()]);
  }
}

function describeNetworkError(err: unknown): string {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError ||
    (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'))
  )
    return 'Graph did not answer in time';
  if (err instanceof undiciErrors.UndiciError) return `Graph unreachable: ${err.message}`;
  return `Graph unreachable: ${err instanceof Error ? err.message : String(err)}`;
}

function toGraphError(status: number, parsed: unknown, retryAfter: number | null): GraphError {
  const e = (parsed as { error?: Record<string, unknown> } | undefined)?.error;
  if (e && typeof e === 'object') {
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
    const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
    const data = e.error_data as { details?: unknown } | undefined;
    return new GraphError(
      str(e.message) ?? `Graph answered ${status}`,
      status,
      num(e.code),
      num(e.error_subcode),
      str(e.type),
      retryAfter,
      str(data?.details) ?? str(e.error_user_msg),
    );
  }
  return new GraphError(`Graph answered ${status}`, status, null, null, null, retryAfter);
}
