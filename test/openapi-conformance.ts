// Every response the test apps give is checked against docs/openapi.json: the status is one the
// operation documents, the body matches the documented schema (JSON Schema 2020-12, with the
// document's components), and the documented required headers are present. Mismatches are kept
// here and fail the running test (test/setup.ts) and the app's close().
import { appendFileSync, readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

/* eslint-disable @typescript-eslint/no-explicit-any -- the document is walked as plain JSON */
type Json = any;

export interface ObservedResponse {
  method: string;
  /** The route's path as Fastify spells it (`/v1/contacts/:id`); undefined when no route matched. */
  route: string | undefined;
  status: number;
  headers: Record<string, unknown>;
  /** The body's text, or null when it was a stream (or absent). */
  body: string | null;
}

const DOC_ID = 'https://switchboard.invalid/openapi.json';
const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']);

/** A pointer token (RFC 6901). */
const token = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class OpenApiConformance {
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();
  /** Fastify route path → OpenAPI path. */
  private readonly paths = new Map<string, string>();

  constructor(private readonly doc: Json) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addFormat('binary', true);
    this.ajv.addFormat('e164', true);
    this.ajv.addSchema({ ...doc, $id: DOC_ID });
    for (const path of Object.keys(doc.paths ?? {}))
      this.paths.set(path.replace(/\{([^}]+)\}/g, ':$1'), path);
  }

  static fromFile(file = new URL('../docs/openapi.json', import.meta.url)): OpenApiConformance {
    return new OpenApiConformance(JSON.parse(readFileSync(file, 'utf8')));
  }

  /** The problems of one response; none when it conforms (or its route is not in the document). */
  check(r: ObservedResponse): string[] {
    if (r.route === undefined) return [];
    const route = r.route.length > 1 ? r.route.replace(/\/$/, '') : r.route;
    const path = this.paths.get(route);
    const method = r.method.toLowerCase();
    const name = `${r.method} ${path ?? route}`;
    if (path === undefined) return [`${name}: the route is not in the document`];
    const item = this.doc.paths[path];
    // A HEAD the document leaves out is the GET without its body (Fastify answers both).
    const opMethod = item[method] ? method : method === 'head' && item.get ? 'get' : null;
    if (!opMethod || !METHODS.has(opMethod))
      return [`${name}: the operation is not in the document`];
    const op = item[opMethod];
    const label = `${r.method} ${path} (${op.operationId ?? opMethod}) answered ${r.status}`;
    const key = [String(r.status), `${String(r.status)[0]}XX`, 'default'].find(
      (k) => op.responses?.[k],
    );
    if (!key) return [`${label}: the status is not documented`];
    const response = this.resolve(op.responses[key]);
    const problems: string[] = [];
    for (const [header, spec] of Object.entries<Json>(response.headers ?? {})) {
      const h = this.resolve(spec);
      if (h.required && r.headers[header.toLowerCase()] === undefined)
        problems.push(`${label}: the required header ${header} is missing`);
    }
    if (method === 'head' || r.body === null) return problems;
    const contentType = String((r.headers['content-type'] as string | undefined) ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    const content = response.content as Record<string, Json> | undefined;
    if (!content) {
      if (r.body.length > 0 && r.status !== 204)
        problems.push(`${label}: a body (${contentType}) where none is documented`);
      return problems;
    }
    // A documented range (`*/*`, `image/*`) takes any type within it.
    const mediaKey = Object.keys(content).find((k) => {
      const range = k.toLowerCase();
      if (range === '*/*' || range === contentType) return true;
      return range.endsWith('/*') && contentType.startsWith(range.slice(0, -1));
    });
    if (!mediaKey) {
      if (r.body.length > 0 || r.status !== 204)
        problems.push(
          `${label}: Content-Type ${contentType || '(none)'} is not one of ${Object.keys(content).join(', ')}`,
        );
      return problems;
    }
    if (!/json/.test(mediaKey) || !content[mediaKey].schema) return problems;
    let body: unknown;
    try {
      body = JSON.parse(r.body);
    } catch {
      return [...problems, `${label}: the body is not JSON`];
    }
    const pointer = `#/paths/${token(path)}/${opMethod}/responses/${key}/content/${token(mediaKey)}/schema`;
    const validate = this.validator(pointer);
    if (!validate(body))
      problems.push(
        `${label}: the body does not match the schema: ${this.ajv.errorsText(validate.errors, { separator: '; ' })} — body ${r.body.slice(0, 300)}`,
      );
    return problems;
  }

  private validator(pointer: string): ValidateFunction {
    let v = this.validators.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `${DOC_ID}${pointer}` });
      this.validators.set(pointer, v);
    }
    return v;
  }

  /** Follows a local `$ref` (responses and headers may be shared components). */
  private resolve(node: Json): Json {
    let n = node;
    while (n && typeof n.$ref === 'string' && n.$ref.startsWith('#/')) {
      n = n.$ref
        .slice(2)
        .split('/')
        .map((t: string) => t.replace(/~1/g, '/').replace(/~0/g, '~'))
        .reduce((o: Json, t: string) => o?.[t], this.doc);
    }
    return n;
  }
}

let shared: OpenApiConformance | null = null;
const mismatches: string[] = [];

/** The mismatches seen since the last call, which forgets them. */
export function takeMismatches(): string[] {
  return mismatches.splice(0);
}

const PAYLOADS = new WeakMap<FastifyRequest, string | null>();

/**
 * Checks every response of `app` (inject and real HTTP alike). Routes the document hides (the
 * docs page, health, the app shell) are not checked. Mismatches go to `sink` (by default the list
 * that the test setup turns into a failure).
 */
export function installConformanceCheck(
  app: FastifyInstance,
  opts: { conformance?: OpenApiConformance; sink?: (problem: string) => void } = {},
): void {
  const conformance = opts.conformance ?? (shared ??= OpenApiConformance.fromFile());
  const log = process.env.OPENAPI_MISMATCH_LOG;
  const sink =
    opts.sink ??
    ((p: string) => {
      mismatches.push(p);
      // To gather every mismatch of a run in one file.
      if (log) appendFileSync(log, `${p}\n`);
    });
  app.addHook('onSend', async (request: FastifyRequest, _reply: FastifyReply, payload: unknown) => {
    PAYLOADS.set(
      request,
      typeof payload === 'string'
        ? payload
        : Buffer.isBuffer(payload)
          ? payload.toString('utf8')
          : payload == null
            ? ''
            : null,
    );
    return payload;
  });
  app.addHook('onResponse', async (request: FastifyRequest, reply: FastifyReply) => {
    const schema = request.routeOptions.schema;
    if (schema?.hide) return;
    // Only routes that were found: an unmatched URL has no operation to check against.
    const route = request.routeOptions.url;
    if (route === undefined || request.is404) return;
    const problems = conformance.check({
      method: request.method,
      route,
      status: reply.statusCode,
      headers: reply.getHeaders(),
      body: PAYLOADS.has(request) ? PAYLOADS.get(request)! : null,
    });
    for (const p of problems) sink(p);
  });
}
