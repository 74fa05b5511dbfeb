/**
 * A fake of Meta's Graph API for the test suite: a real HTTP server on 127.0.0.1 that checks
 * bearer tokens against the assets a test registers, records every request's exact bytes, and
 * answers with Meta's shapes, including its error envelope.
 *
 * Where the shapes come from (Meta's published reference, read through the search tool):
 * - the WhatsApp Business Platform OpenAPI document (github.com/facebook/openapi,
 *   business-messaging-api_v23.0.yaml): `GraphAPIError`, `CursorPaging`, the phone number
 *   object, the send-message answer (`messaging_product`, `contacts[{input, wa_id}]`,
 *   `messages[{id}]`), the template list and create answers;
 * - developers.facebook.com/docs/whatsapp/cloud-api/reference/media (retrieve media URL:
 *   `messaging_product, url, mime_type, sha256, file_size, id`; the URL needs the same token);
 * - developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes (codes, titles and
 *   the HTTP status Meta answers each with);
 * - developers.facebook.com/docs/messenger-platform/reference/send-api (`recipient_id`,
 *   `message_id`) and the user profile API (`first_name`, `last_name`; `name`, `username` on
 *   Instagram).
 *
 * Use `url` as META_GRAPH_URL. Any version segment of the form `vNN.N` is accepted.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface RecordedGraphRequest {
  method: string;
  /** The URL path as sent, version included: `/v23.0/123/messages`. */
  path: string;
  /** The version segment (`v23.0`), or null when the path had none. */
  version: string | null;
  /** The path after the version, without leading slash: `123/messages`. */
  resource: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  /** The bearer token (or `access_token` query parameter), null when none was sent. */
  token: string | null;
  /** The exact bytes received. */
  body: Buffer;
  /** The body parsed as JSON, or undefined when it was empty or not JSON. */
  json: unknown;
  at: number;
}

/**
 * Which requests a helper applies to: a resource (`123/messages`, leading slash optional), a
 * pattern tested against the resource, an object also naming the method, or a predicate.
 */
export type Matcher =
  | string
  | RegExp
  | { method?: string; resource?: string | RegExp }
  | ((req: RecordedGraphRequest) => boolean);

/** Meta's error object, as it appears under `error`. */
export interface GraphErrorBody {
  message: string;
  type: string;
  code: number;
  error_subcode?: number;
  error_user_title?: string;
  error_user_msg?: string;
  error_data?: { messaging_product?: string; details: string };
  fbtrace_id?: string;
}

export interface InjectedFailure {
  status: number;
  error: Partial<GraphErrorBody> & { code: number };
  headers?: Record<string, string>;
  /** Answer these bytes instead of Graph's envelope (a proxy's HTML error page, say). */
  rawBody?: string;
}

export interface PhoneNumberAsset {
  id: string;
  token: string;
  display_phone_number: string;
  verified_name: string;
  business_account_id: string;
  quality_rating?: 'GREEN' | 'YELLOW' | 'RED' | 'UNKNOWN';
}

export interface PageAsset {
  id: string;
  token: string;
  name: string;
  instagram_account_id?: string;
}

export interface MediaAsset {
  id: string;
  bytes: Buffer;
  mimeType: string;
  /** The phone number whose token may read it; any registered phone number's when absent. */
  phoneNumberId?: string;
}

export interface TemplateAsset {
  business_account_id: string;
  name: string;
  language: string;
  status?: 'APPROVED' | 'PENDING' | 'REJECTED' | 'PAUSED' | 'DISABLED' | 'IN_APPEAL';
  category?: 'MARKETING' | 'UTILITY' | 'AUTHENTICATION';
  id?: string;
  components?: Array<Record<string, unknown>>;
  /** Shorthand for a BODY component with this text. */
  body?: string;
  /** Meta's reason for a rejection (`INCORRECT_CATEGORY`…); Meta writes `NONE` when there is none. */
  rejected_reason?: string;
}

export interface ProfileAsset {
  /** The PSID (Messenger) or IGSID (Instagram). */
  id: string;
  first_name?: string;
  last_name?: string;
  name?: string;
  username?: string;
  profile_pic?: string;
}

/**
 * Meta's own wording and HTTP status for the codes tests use most
 * (from the Cloud API error-code table; the titles are Meta's, the messages shortened).
 */
export const META_ERRORS = {
  apiUnknown: {
    status: 400,
    error: { code: 1, type: 'OAuthException', message: 'An unknown error occurred' },
  },
  apiService: {
    status: 503,
    error: { code: 2, type: 'OAuthException', message: 'Service temporarily unavailable' },
  },
  tooManyCalls: {
    status: 400,
    error: { code: 4, type: 'OAuthException', message: 'Application request limit reached' },
  },
  rateLimitIssues: {
    status: 400,
    error: { code: 80007, type: 'OAuthException', message: 'Rate limit issues' },
  },
  rateLimitHit: {
    status: 400,
    error: { code: 130429, type: 'OAuthException', message: 'Rate limit hit' },
  },
  pairRateLimit: {
    status: 400,
    error: {
      code: 131056,
      type: 'OAuthException',
      message: '(Business Account, Consumer Account) pair rate limit hit',
    },
  },
  invalidParameter: {
    status: 400,
    error: { code: 100, type: 'OAuthException', message: 'Invalid parameter' },
  },
  expiredToken: {
    status: 401,
    error: {
      code: 190,
      type: 'OAuthException',
      message: 'Error validating access token: Session has expired',
    },
  },
  undeliverable: {
    status: 400,
    error: { code: 131026, type: 'OAuthException', message: 'Message undeliverable' },
  },
  somethingWentWrong: {
    status: 500,
    error: { code: 131000, type: 'OAuthException', message: 'Something went wrong' },
  },
  templateMissing: {
    status: 404,
    error: {
      code: 132001,
      type: 'OAuthException',
      message: 'Template name does not exist in the translation',
    },
  },
} as const satisfies Record<string, InjectedFailure>;

interface Pending {
  matcher: Matcher;
  remaining: number;
}

const VERSION = /^v\d+\.\d+$/;

function fbtraceId(): string {
  return randomBytes(8).toString('base64url');
}

function matches(m: Matcher, req: RecordedGraphRequest): boolean {
  const sameResource = (want: string | RegExp) =>
    typeof want === 'string' ? req.resource === want.replace(/^\/+/, '') : want.test(req.resource);
  if (typeof m === 'function') return m(req);
  if (typeof m === 'string' || m instanceof RegExp) return sameResource(m);
  if (m.method && m.method.toUpperCase() !== req.method) return false;
  return m.resource === undefined || sameResource(m.resource);
}

class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
  ) {}
}

function graphError(status: number, error: Partial<GraphErrorBody> & { code: number }): Reply {
  return new Reply(status, {
    error: {
      message: error.message ?? 'An unknown error occurred',
      type: error.type ?? 'OAuthException',
      code: error.code,
      ...(error.error_subcode !== undefined ? { error_subcode: error.error_subcode } : {}),
      ...(error.error_user_title !== undefined ? { error_user_title: error.error_user_title } : {}),
      ...(error.error_user_msg !== undefined ? { error_user_msg: error.error_user_msg } : {}),
      ...(error.error_data !== undefined ? { error_data: error.error_data } : {}),
      fbtrace_id: error.fbtrace_id ?? fbtraceId(),
    },
  });
}

/** `(#100) …`-style parameter errors, as the Cloud API words them. */
function invalidParameter(details: string, subcode?: number): Reply {
  return graphError(400, {
    code: 100,
    type: 'OAuthException',
    message: '(#100) Invalid parameter',
    ...(subcode !== undefined ? { error_subcode: subcode } : {}),
    error_data: { messaging_product: 'whatsapp', details },
  });
}

/** What Graph says when the object is unknown or the token may not see it (one answer for both). */
function unsupported(method: string, id: string): Reply {
  return graphError(400, {
    code: 100,
    error_subcode: 33,
    type: 'GraphMethodException',
    message: `Unsupported ${method.toLowerCase()} request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation. Please read the Graph API documentation at https://developers.facebook.com/docs/graph-api`,
  });
}

export class FakeGraph {
  readonly requests: RecordedGraphRequest[] = [];
  private server: http.Server | null = null;
  private readonly sockets = new Set<Socket>();
  private port = 0;

  private readonly phones = new Map<string, PhoneNumberAsset>();
  private readonly pages = new Map<string, PageAsset>();
  private readonly media = new Map<string, MediaAsset>();
  private readonly profiles = new Map<string, ProfileAsset>();
  private templates: Array<Required<Omit<TemplateAsset, 'body'>>> = [];
  private readonly files = new Map<string, { bytes: Buffer; mimeType: string }>();

  private failures: Array<Pending & { failure: InjectedFailure }> = [];
  private hangs: Pending[] = [];
  private readonly hung = new Set<http.ServerResponse>();
  private delayMs = 0;
  private seq = 0;
  private readonly waiters = new Set<() => void>();

  /** The base URL, for META_GRAPH_URL. Valid after `start()`. */
  get url(): string {
    if (!this.server) throw new Error('FakeGraph not started');
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => this.onRequest(req, res));
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Forgets recorded requests, injected faults, delays and hangs; assets stay registered. */
  reset(): void {
    this.requests.length = 0;
    this.failures = [];
    this.hangs = [];
    this.delayMs = 0;
    for (const res of this.hung) res.socket?.destroy();
    this.hung.clear();
  }

  // ---- assets ----

  addPhoneNumber(p: PhoneNumberAsset): this {
    this.phones.set(p.id, p);
    return this;
  }

  addPage(p: PageAsset): this {
    this.pages.set(p.id, p);
    return this;
  }

  addMedia(m: MediaAsset): this {
    this.media.set(m.id, m);
    return this;
  }

  /** A person a page token may look up by PSID / IGSID. */
  addProfile(p: ProfileAsset): this {
    this.profiles.set(p.id, p);
    return this;
  }

  addTemplate(t: TemplateAsset): { id: string } {
    const id = t.id ?? this.nextNumericId();
    this.templates.push({
      business_account_id: t.business_account_id,
      name: t.name,
      language: t.language,
      status: t.status ?? 'APPROVED',
      category: t.category ?? 'UTILITY',
      rejected_reason: t.rejected_reason ?? 'NONE',
      id,
      components: t.components ?? (t.body !== undefined ? [{ type: 'BODY', text: t.body }] : []),
    });
    return { id };
  }

  /** Sets a template's status, as Meta's review would (the webhook is the test's to post). */
  setTemplateStatus(id: string, status: NonNullable<TemplateAsset['status']>): void {
    const t = this.templates.find((x) => x.id === id);
    if (!t) throw new Error(`no template ${id}`);
    t.status = status;
  }

  /** Templates as the fake holds them (including those the service submitted). */
  templatesOf(businessAccountId: string) {
    return this.templates.filter((t) => t.business_account_id === businessAccountId);
  }

  /** A file served without a token (Messenger / Instagram attachment URLs); returns its URL. */
  addPublicFile(name: string, bytes: Buffer, mimeType: string): string {
    this.files.set(name, { bytes, mimeType });
    return `${this.url}/files/${encodeURIComponent(name)}`;
  }

  // ---- faults ----

  /** The next `n` requests matching answer this Meta error instead (with optional headers such as Retry-After). */
  failNext(matcher: Matcher, n: number, failure: InjectedFailure): this {
    this.failures.push({ matcher, remaining: n, failure });
    return this;
  }

  /** Every answer waits this long first (0 to stop). */
  delay(ms: number): this {
    this.delayMs = ms;
    return this;
  }

  /** The next `n` requests matching are never answered (until `reset()` or `stop()`). */
  hang(matcher: Matcher = () => true, n = Number.POSITIVE_INFINITY): this {
    this.hangs.push({ matcher, remaining: n });
    return this;
  }

  // ---- what was received ----

  find(matcher: Matcher): RecordedGraphRequest[] {
    return this.requests.filter((r) => matches(matcher, r));
  }

  last(matcher: Matcher = () => true): RecordedGraphRequest | undefined {
    return this.find(matcher).at(-1);
  }

  /** The JSON bodies of `POST {id}/messages` received (WhatsApp phone number or page id). */
  sentMessages(senderId?: string): Array<Record<string, unknown>> {
    return this.find(
      (r) =>
        r.method === 'POST' &&
        /^[^/]+\/messages$/.test(r.resource) &&
        (senderId === undefined || r.resource === `${senderId}/messages`),
    ).map((r) => r.json as Record<string, unknown>);
  }

  /** Resolves when `count` requests match (already or later); rejects after `timeoutMs`. */
  async waitFor(matcher: Matcher, count = 1, timeoutMs = 5_000): Promise<RecordedGraphRequest[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.find(matcher);
      if (found.length >= count) return found;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `fake Graph: ${found.length}/${count} matching requests after ${timeoutMs} ms`,
        );
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, left);
        this.waiters.add(done);
      });
    }
  }

  // ---- serving ----

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const recorded = this.record(req, Buffer.concat(chunks));
      this.requests.push(recorded);
      for (const w of [...this.waiters]) w();

      const hang = this.take(this.hangs, recorded);
      if (hang) {
        this.hung.add(res);
        res.on('close', () => this.hung.delete(res));
        return;
      }
      const injected = this.take(this.failures, recorded);
      let reply: Reply | { raw: Buffer; mimeType: string };
      if (injected?.failure.rawBody !== undefined) {
        reply = new Reply(injected.failure.status, injected.failure.rawBody, {
          'content-type': 'text/html',
          ...injected.failure.headers,
        });
      } else if (injected) {
        const r = graphError(injected.failure.status, injected.failure.error);
        reply = new Reply(r.status, r.body, injected.failure.headers);
      } else {
        try {
          reply = this.route(recorded);
        } catch (err) {
          reply = graphError(500, { code: 1, message: `fake Graph bug: ${String(err)}` });
        }
      }
      const send = () => {
        if (res.destroyed) return;
        if (reply instanceof Reply) {
          const body = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
          res.writeHead(reply.status, {
            'content-type': 'application/json; charset=UTF-8',
            'content-length': Buffer.byteLength(body),
            ...reply.headers,
          });
          res.end(body);
        } else {
          res.writeHead(200, {
            'content-type': reply.mimeType,
            'content-length': reply.raw.length,
          });
          res.end(reply.raw);
        }
      };
      if (this.delayMs > 0) setTimeout(send, this.delayMs);
      else send();
    });
  }

  private take<T extends Pending>(list: T[], req: RecordedGraphRequest): T | undefined {
    const hit = list.find((p) => p.remaining > 0 && matches(p.matcher, req));
    if (hit) hit.remaining -= 1;
    return hit;
  }

  private record(req: http.IncomingMessage, body: Buffer): RecordedGraphRequest {
    const url = new URL(req.url ?? '/', 'http://fake');
    const segments = url.pathname.split('/').filter(Boolean);
    const version = segments[0] && VERSION.test(segments[0]) ? segments[0] : null;
    const resource = (version ? segments.slice(1) : segments).map(decodeURIComponent).join('/');
    const query = Object.fromEntries(url.searchParams);
    const auth = req.headers.authorization;
    const bearer = typeof auth === 'string' && /^Bearer /i.test(auth) ? auth.slice(7).trim() : null;
    let json: unknown = undefined;
    if (body.length > 0) {
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        json = undefined;
      }
    }
    return {
      method: req.method ?? '',
      path: url.pathname,
      version,
      resource,
      query,
      headers: req.headers,
      token: bearer ?? query.access_token ?? null,
      body,
      json,
      at: Date.now(),
    };
  }

  private route(r: RecordedGraphRequest): Reply | { raw: Buffer; mimeType: string } {
    if (r.method === 'GET' && r.resource.startsWith('files/')) {
      const f = this.files.get(r.resource.slice('files/'.length));
      return f
        ? { raw: f.bytes, mimeType: f.mimeType }
        : graphError(404, { code: 100, message: 'Not found' });
    }
    if (r.resource === 'whatsapp_business/attachments') return this.mediaBytes(r);

    if (!r.version) {
      return graphError(400, { code: 2500, message: `Unknown path components: ${r.path}` });
    }
    if (r.token === null) {
      return graphError(400, {
        code: 104,
        type: 'OAuthException',
        message: 'An access token is required to request this resource.',
      });
    }
    if (!this.knownToken(r.token)) {
      return graphError(401, {
        code: 190,
        type: 'OAuthException',
        message: 'Invalid OAuth access token - Cannot parse access token',
      });
    }
    const [id = '', edge, ...rest] = r.resource.split('/');
    if (rest.length > 0)
      return graphError(400, {
        code: 2500,
        message: `Unknown path components: /${rest.join('/')}`,
      });

    const phone = this.phones.get(id);
    if (phone) {
      if (phone.token !== r.token) return unsupported(r.method, id);
      if (r.method === 'GET' && edge === undefined) return this.phoneNumber(phone, r);
      if (r.method === 'POST' && edge === 'messages') return this.sendWhatsApp(r);
      return unsupported(r.method, id);
    }
    const wabaPhones = [...this.phones.values()].filter((p) => p.business_account_id === id);
    if (wabaPhones.length > 0) {
      if (!wabaPhones.some((p) => p.token === r.token)) return unsupported(r.method, id);
      if (edge === 'message_templates' && r.method === 'GET') return this.listTemplates(id, r);
      if (edge === 'message_templates' && r.method === 'POST') return this.createTemplate(id, r);
      if (edge === 'message_templates' && r.method === 'DELETE') return this.deleteTemplate(id, r);
      return unsupported(r.method, id);
    }
    const page = this.pages.get(id);
    if (page) {
      if (page.token !== r.token) return unsupported(r.method, id);
      if (r.method === 'GET' && edge === undefined) return this.pageObject(page, r);
      if (r.method === 'POST' && edge === 'messages') return this.sendPageMessage(r);
      return unsupported(r.method, id);
    }
    const media = this.media.get(id);
    if (media && r.method === 'GET' && edge === undefined) {
      if (!this.mayReadMedia(media, r.token)) return unsupported(r.method, id);
      return new Reply(200, {
        messaging_product: 'whatsapp',
        url: `${this.url}/whatsapp_business/attachments/?mid=${encodeURIComponent(media.id)}&ext=${Math.floor(Date.now() / 1000)}&hash=${fbtraceId()}`,
        mime_type: media.mimeType,
        sha256: createHash('sha256').update(media.bytes).digest('hex'),
        file_size: media.bytes.length,
        id: media.id,
      });
    }
    const profile = this.profiles.get(id);
    if (profile && r.method === 'GET' && edge === undefined) {
      if (![...this.pages.values()].some((p) => p.token === r.token))
        return unsupported(r.method, id);
      return new Reply(
        200,
        this.pickFields({ ...profile }, r.query.fields, ['first_name', 'last_name']),
      );
    }
    return unsupported(r.method, id);
  }

  private knownToken(token: string): boolean {
    for (const p of this.phones.values()) if (p.token === token) return true;
    for (const p of this.pages.values()) if (p.token === token) return true;
    return false;
  }

  private mayReadMedia(media: MediaAsset, token: string): boolean {
    if (media.phoneNumberId) return this.phones.get(media.phoneNumberId)?.token === token;
    return [...this.phones.values()].some((p) => p.token === token);
  }

  private pickFields(
    obj: Record<string, unknown>,
    fields: string | undefined,
    defaults: string[],
  ): Record<string, unknown> {
    const wanted = fields ? fields.split(',').map((f) => f.trim()) : defaults;
    const out: Record<string, unknown> = {};
    for (const f of wanted) if (obj[f] !== undefined) out[f] = obj[f];
    out.id = obj.id;
    return out;
  }

  private phoneNumber(p: PhoneNumberAsset, r: RecordedGraphRequest): Reply {
    const full = {
      verified_name: p.verified_name,
      code_verification_status: 'VERIFIED',
      display_phone_number: p.display_phone_number,
      quality_rating: p.quality_rating ?? 'GREEN',
      platform_type: 'CLOUD_API',
      throughput: { level: 'STANDARD' },
      id: p.id,
    };
    if (!r.query.fields) return new Reply(200, full);
    return new Reply(200, this.pickFields(full, r.query.fields, []));
  }

  private pageObject(p: PageAsset, r: RecordedGraphRequest): Reply {
    const full: Record<string, unknown> = { name: p.name, id: p.id };
    if (p.instagram_account_id) full.instagram_business_account = { id: p.instagram_account_id };
    return new Reply(200, this.pickFields(full, r.query.fields, ['name']));
  }

  private sendWhatsApp(r: RecordedGraphRequest): Reply {
    const b = r.json;
    if (!b || typeof b !== 'object' || Array.isArray(b))
      return invalidParameter('Request body must be a JSON object');
    const body = b as Record<string, unknown>;
    if (body.messaging_product !== 'whatsapp')
      return invalidParameter(
        "The parameter messaging_product is required and must be 'whatsapp'.",
      );
    if (typeof body.to !== 'string' || !/^\+?\d{6,15}$/.test(body.to))
      return invalidParameter(
        'The parameter to must be a phone number (digits, with country code).',
      );
    const type = body.type ?? 'text';
    const payloadKinds = [
      'text',
      'template',
      'image',
      'document',
      'audio',
      'video',
      'sticker',
      'location',
      'contacts',
      'interactive',
      'reaction',
    ];
    if (typeof type !== 'string' || !payloadKinds.includes(type))
      return invalidParameter(`The parameter type is not one of the allowed values.`);
    const payload = body[type];
    if (!payload || typeof payload !== 'object')
      return invalidParameter(`The parameter ${type} is required.`);
    const p = payload as Record<string, unknown>;
    if (type === 'text' && typeof p.body !== 'string')
      return invalidParameter("The parameter text['body'] is required.");
    if (type === 'template') {
      const lang = p.language as { code?: unknown } | undefined;
      if (typeof p.name !== 'string')
        return invalidParameter("The parameter template['name'] is required.");
      if (typeof lang?.code !== 'string')
        return invalidParameter("The parameter template['language']['code'] is required.");
    }
    if (
      (type === 'image' || type === 'document') &&
      typeof p.link !== 'string' &&
      typeof p.id !== 'string'
    )
      return invalidParameter(`The parameter ${type}['link'] or ${type}['id'] is required.`);
    const digits = body.to.replace(/^\+/, '');
    return new Reply(200, {
      messaging_product: 'whatsapp',
      contacts: [{ input: body.to, wa_id: digits }],
      messages: [{ id: this.wamid() }],
    });
  }

  private sendPageMessage(r: RecordedGraphRequest): Reply {
    const body = r.json as { recipient?: { id?: unknown }; message?: unknown } | undefined;
    if (!body || typeof body.recipient?.id !== 'string')
      return graphError(400, { code: 100, message: '(#100) The parameter recipient is required' });
    if (!body.message || typeof body.message !== 'object')
      return graphError(400, { code: 100, message: '(#100) The parameter message is required' });
    return new Reply(200, {
      recipient_id: body.recipient.id,
      message_id: `m_${randomBytes(24).toString('base64url')}`,
    });
  }

  private listTemplates(wabaId: string, r: RecordedGraphRequest): Reply {
    let list = this.templatesOf(wabaId);
    if (r.query.name) list = list.filter((t) => t.name === r.query.name);
    if (r.query.status) list = list.filter((t) => t.status === r.query.status);
    const limit = Math.max(1, Math.min(Number(r.query.limit) || 25, 100));
    const start = r.query.after ? Number(Buffer.from(r.query.after, 'base64url').toString()) : 0;
    const page = list.slice(start, start + limit);
    const cursor = (i: number) => Buffer.from(String(i)).toString('base64url');
    const paging: Record<string, unknown> = {
      cursors: { before: cursor(start), after: cursor(start + page.length) },
    };
    if (start + page.length < list.length) {
      const next = new URLSearchParams({
        ...r.query,
        limit: String(limit),
        after: cursor(start + page.length),
      });
      next.delete('access_token');
      paging.next = `${this.url}/${r.version}/${wabaId}/message_templates?${next.toString()}`;
    }
    return new Reply(200, {
      data: page.map((t) => ({
        name: t.name,
        parameter_format: 'POSITIONAL',
        components: t.components,
        language: t.language,
        status: t.status,
        category: t.category,
        rejected_reason: t.rejected_reason,
        id: t.id,
      })),
      paging,
    });
  }

  /**
   * `DELETE /{waba}/message_templates?name=…[&hsm_id=…]`: by name, every language of it; with
   * `hsm_id`, that one template (whose name must match). One it does not hold is an invalid
   * parameter, as Meta answers.
   */
  private deleteTemplate(wabaId: string, r: RecordedGraphRequest): Reply {
    const name = r.query.name;
    if (!name) return invalidParameter('name is required');
    const doomed = this.templatesOf(wabaId).filter(
      (t) => t.name === name && (r.query.hsm_id === undefined || t.id === r.query.hsm_id),
    );
    if (doomed.length === 0)
      return graphError(400, {
        code: 100,
        error_subcode: 2593002,
        message: 'Invalid parameter',
        error_user_title: 'Message template not found',
        error_user_msg: `There is no message template named ${name}.`,
      });
    this.templates = this.templates.filter((t) => !doomed.includes(t));
    return new Reply(200, { success: true });
  }

  private createTemplate(wabaId: string, r: RecordedGraphRequest): Reply {
    const body = r.json as Record<string, unknown> | undefined;
    if (!body || typeof body.name !== 'string' || !/^[a-z0-9_]{1,512}$/.test(body.name))
      return invalidParameter('name: lowercase letters, digits and underscores only');
    if (typeof body.language !== 'string') return invalidParameter('language is required');
    if (!['MARKETING', 'UTILITY', 'AUTHENTICATION'].includes(body.category as string))
      return invalidParameter('category must be MARKETING, UTILITY or AUTHENTICATION');
    if (!Array.isArray(body.components) || body.components.length === 0)
      return invalidParameter('components is required');
    if (
      this.templatesOf(wabaId).some((t) => t.name === body.name && t.language === body.language)
    ) {
      return graphError(400, {
        code: 100,
        error_subcode: 2388024,
        message: 'Invalid parameter',
        error_user_title: 'Message template already exists',
        error_user_msg: `There is already ${body.language} content for this template.`,
      });
    }
    const { id } = this.addTemplate({
      business_account_id: wabaId,
      name: body.name,
      language: body.language,
      category: body.category as TemplateAsset['category'],
      status: 'PENDING',
      components: body.components as Array<Record<string, unknown>>,
    });
    return new Reply(200, { id, status: 'PENDING', category: body.category });
  }

  private mediaBytes(r: RecordedGraphRequest): Reply | { raw: Buffer; mimeType: string } {
    const media = this.media.get(r.query.mid ?? '');
    if (r.token === null || (media && !this.mayReadMedia(media, r.token)))
      return graphError(401, { code: 190, message: 'Invalid OAuth access token' });
    if (!media) return graphError(404, { code: 100, message: 'Media not found' });
    return { raw: media.bytes, mimeType: media.mimeType };
  }

  private wamid(): string {
    this.seq += 1;
    const raw = `${this.port}:${this.seq}:${randomBytes(6).toString('hex')}`;
    return `wamid.${Buffer.from(raw).toString('base64')}`;
  }

  private nextNumericId(): string {
    this.seq += 1;
    return String(1_000_000_000_000_000n + BigInt(this.seq) * 7919n);
  }
}

/** Starts a fake Graph API on a random loopback port. */
export async function startFakeGraph(): Promise<FakeGraph> {
  return new FakeGraph().start();
}

/** `sha256=<hex>` over the exact bytes, keyed with the app secret: Meta's `X-Hub-Signature-256`. */
export function hubSignature(appSecret: string, raw: Buffer | string): string {
  return `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}`;
}

/**
 * Posts a webhook to the service as Meta does: the JSON bytes signed with the app secret.
 * `signature` overrides the header (a wrong one, or null for none).
 */
export async function postWebhook(
  url: string,
  payload: unknown,
  opts: { appSecret: string; signature?: string | null; raw?: Buffer },
): Promise<{ status: number; body: string }> {
  const raw = opts.raw ?? Buffer.from(JSON.stringify(payload));
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const sig = opts.signature === undefined ? hubSignature(opts.appSecret, raw) : opts.signature;
  if (sig !== null) headers['x-hub-signature-256'] = sig;
  const res = await fetch(url, { method: 'POST', headers, body: raw });
  return { status: res.status, body: await res.text() };
}
