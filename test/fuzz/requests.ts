import fc from 'fast-check';
import {
  hostileDateTimes,
  hostileStrings,
  hostileValue,
  idToken,
  nested,
  isToken,
  pathsOf,
  raw,
  rawBytes,
  setAt,
  type Token,
} from './values.js';

/** The part of JSON Schema the service's OpenAPI document uses. */
export interface Schema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxProperties?: number;
  pattern?: string;
  format?: string;
  default?: unknown;
}

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}

export interface Operation {
  method: string;
  /** As the document writes it: `/v1/contacts/{id}`. */
  path: string;
  pathParams: Parameter[];
  queryParams: Parameter[];
  body: Schema | undefined;
  admin: boolean;
}

type OpenApi = {
  components?: Record<string, Record<string, unknown>>;
  paths: Record<
    string,
    Record<string, { parameters?: Parameter[]; requestBody?: unknown; security?: unknown }>
  >;
};

/** `value` with every `#/components/…` reference of the document replaced by what it names. */
function dereferenced<T>(doc: OpenApi, value: T, seen: string[] = []): T {
  if (Array.isArray(value)) return value.map((v: unknown) => dereferenced(doc, v, seen)) as T;
  if (value === null || typeof value !== 'object') return value;
  const ref = (value as { $ref?: unknown }).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/components/') && !seen.includes(ref)) {
    const [, , kind, name] = ref.split('/');
    return dereferenced(doc, doc.components?.[kind!]?.[name!] as T, [...seen, ref]);
  }
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, dereferenced(doc, v, seen)]),
  ) as T;
}

/** Every operation of the document, in its order. */
export function operationsOf(doc: OpenApi): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const op = dereferenced(doc, raw);
      const params = op.parameters ?? [];
      const body = (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)
        ?.content?.['application/json']?.schema;
      ops.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path'),
        queryParams: params.filter((p) => p.in === 'query'),
        body,
        admin: JSON.stringify(op.security ?? []).includes('adminToken'),
      });
    }
  }
  return ops;
}

const text: Schema = { type: 'string' };
const connectionId: Parameter = { name: 'connection_id', in: 'path', required: true, schema: text };

/**
 * Routes the OpenAPI document hides, driven all the same: the providers' webhooks (no API key;
 * their ids are no resource of the run, so they answer as an unknown connection does, with
 * garbage bodies and handshakes), the metrics and the widget script.
 */
export const HIDDEN_OPERATIONS: readonly Operation[] = [
  {
    method: 'GET',
    path: '/channels/{connection_id}/webhook',
    pathParams: [connectionId],
    queryParams: [
      { name: 'hub.mode', in: 'query', schema: { enum: ['subscribe', 'unsubscribe'] } },
      { name: 'hub.verify_token', in: 'query', schema: text },
      { name: 'hub.challenge', in: 'query', schema: text },
    ],
    body: undefined,
    admin: false,
  },
  {
    method: 'POST',
    path: '/channels/{connection_id}/webhook',
    pathParams: [connectionId],
    queryParams: [],
    body: {
      type: 'object',
      required: ['object', 'entry'],
      properties: {
        object: { enum: ['whatsapp_business_account', 'page', 'instagram'] },
        entry: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              id: text,
              time: { type: 'integer' },
              changes: { type: 'array', items: { type: 'object', properties: { field: text } } },
              messaging: { type: 'array', items: { type: 'object' } },
            },
          },
        },
      },
    },
    admin: false,
  },
  {
    method: 'GET',
    path: '/metrics',
    pathParams: [],
    queryParams: [],
    body: undefined,
    admin: false,
  },
  {
    method: 'GET',
    path: '/widget.js',
    pathParams: [],
    queryParams: [],
    body: undefined,
    admin: false,
  },
];

/** HEAD of every GET operation (Fastify answers HEAD on each GET route by running it). */
export function headsOf(ops: readonly Operation[]): Operation[] {
  return ops.filter((o) => o.method === 'GET').map((o) => ({ ...o, method: 'HEAD' }));
}

// The id prefix of src/ids.ts that a path segment's resource has; an unknown one takes any id.
const PREFIX_OF_SEGMENT: Record<string, string[]> = {
  contacts: ['con'],
  users: ['usr'],
  teams: ['team'],
  templates: ['tpl'],
  conversations: ['conv'],
  messages: ['msg'],
  webhooks: ['wh'],
  deliveries: ['dlv', 'evt'],
  broadcasts: ['bc'],
  accounts: ['acc'],
  'api-keys': ['key'],
};
export const ALL_PREFIXES = [...new Set(Object.values(PREFIX_OF_SEGMENT).flat())];

function prefixesForParam(path: string, name: string): string[] {
  const segments = path.split('/');
  const i = segments.indexOf(`{${name}}`);
  return PREFIX_OF_SEGMENT[segments[i - 1] ?? ''] ?? ALL_PREFIXES;
}

const TAGS = ['vip', 'new', 'fuzz', 'Lead Magnet', 'b2b'];
const LOCAL_HTTPS = 'https://127.0.0.1:1/fuzz';

/** Values a field's name says more about than its schema: ids that exist, phones, URLs, times. */
function hinted(name: string | undefined, schema: Schema): fc.Arbitrary<unknown> | undefined {
  const n = fc.nat();
  switch (name ?? '') {
    case 'phone':
      return n.map((i): Token => ({ $token: 'phone', n: i }));
    case 'contact_id':
      return n.map((i) => idToken(['con'], i));
    case 'user_id':
      return n.map((i) => idToken(['usr'], i));
    case 'team_id':
      return n.map((i) => idToken(['team'], i));
    case 'assigned_to':
      return n.map((i) => idToken(['usr', 'team'], i));
    case 'user_ids':
      return fc.array(
        n.map((i) => idToken(['usr'], i)),
        { maxLength: 3 },
      );
    case 'template_name':
      return n.map((i): Token => ({ $token: 'template_name', n: i }));
    case 'url':
    case 'media_url':
      return fc.constantFrom(
        LOCAL_HTTPS,
        `${LOCAL_HTTPS}/image.png`,
        'https://localhost:1/doc.pdf',
      );
    case 'email':
      return fc
        .tuple(fc.stringMatching(/^[a-z0-9]{1,12}$/), fc.constantFrom('example.com', 'fuzz.test'))
        .map(([local, domain]) => `${local}@${domain}`);
    case 'scheduled_at':
      return fc
        .integer({ min: 10, max: 60 * 24 * 30 })
        .map((m): Token => ({ $token: 'future', minutes: m }));
    case 'tag':
      return fc.constantFrom(...TAGS);
    case 'tags':
      if (schema.type === 'array') {
        return fc.uniqueArray(fc.constantFrom(...TAGS), {
          minLength: schema.minItems ?? 0,
          maxLength: 3,
        });
      }
      return undefined;
    case 'custom_fields':
      return fc.dictionary(
        fc.stringMatching(/^[a-z][a-z0-9_]{0,15}$/),
        fc.oneof(
          fc.string({ maxLength: 20 }),
          fc.integer(),
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.boolean(),
        ),
        { maxKeys: 4 },
      );
    default:
      return undefined;
  }
}

/** Valid values for a schema (valid as the schema says; the service's own rules may still refuse). */
export function valueOf(schema: Schema, name?: string): fc.Arbitrary<unknown> {
  const hint = hinted(name, schema);
  if (hint) return hint;
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const choices = schema.anyOf ?? schema.oneOf;
  if (choices) return fc.oneof(...choices.map((s) => valueOf(s, name)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type ?? '') {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({
        min: schema.minimum ?? -1_000_000,
        max: Math.min(schema.maximum ?? 1_000_000, 1_000_000),
      });
    case 'number':
      return fc.double({
        noNaN: true,
        noDefaultInfinity: true,
        min: schema.minimum ?? -1e9,
        max: schema.maximum ?? 1e9,
      });
    case 'string':
      return stringOf(schema);
    case 'array': {
      const item = valueOf(schema.items ?? {}, name);
      const constraints = {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 4, 4),
      };
      return schema.uniqueItems
        ? fc.uniqueArray(item, { ...constraints, selector: (v) => JSON.stringify(v) })
        : fc.array(item, constraints);
    }
    case 'object':
      return objectOf(schema);
    default:
      return fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean());
  }
}

const pad = (n: number, width = 2) => String(Math.abs(n)).padStart(width, '0');

/**
 * A wall-clock time of years 0001 to 9999 written with an offset: near the ends of that range
 * the instant it names may fall outside it (9999-12-31T23:59:59.999-00:01), which is refused.
 */
const anyDateTime = fc
  .tuple(
    fc.oneof(
      fc.date({
        min: new Date('0001-01-01T00:00:00Z'),
        max: new Date('9999-12-31T23:59:59.999Z'),
        noInvalidDate: true,
      }),
      fc.constantFrom(
        new Date('0001-01-01T00:00:00.000Z'),
        new Date('9999-12-31T23:59:59.999Z'),
        new Date('9999-12-31T23:30:00.000Z'),
      ),
    ),
    fc.oneof(fc.integer({ min: -1439, max: 1439 }), fc.constantFrom(0, -1, 1, -1439, 1439)),
    fc.boolean(),
  )
  .map(([wall, offset, z]) => {
    const text = wall.toISOString().slice(0, -1);
    if (z && offset === 0) return `${text}Z`;
    return `${text}${offset < 0 ? '-' : '+'}${pad(Math.trunc(offset / 60))}:${pad(offset % 60)}`;
  });

function stringOf(schema: Schema): fc.Arbitrary<string> {
  if (schema.format === 'date-time') {
    return fc.oneof(
      {
        arbitrary: fc
          .date({
            min: new Date('2000-01-01T00:00:00Z'),
            max: new Date('2099-12-31T00:00:00Z'),
            noInvalidDate: true,
          })
          .map((d) => d.toISOString()),
        weight: 3,
      },
      { arbitrary: anyDateTime, weight: 1 },
    );
  }
  if (schema.format === 'email') return fc.constant('someone@example.com');
  if (schema.format === 'uri') return fc.constant(LOCAL_HTTPS);
  if (schema.pattern)
    return fc
      .stringMatching(new RegExp(schema.pattern))
      .filter((s) => s.length <= (schema.maxLength ?? 512));
  const minLength = schema.minLength ?? 0;
  const maxLength = Math.max(minLength, Math.min(schema.maxLength ?? 24, 24));
  return fc.oneof(
    fc.string({ minLength, maxLength }),
    fc.string({ minLength, maxLength, unit: 'grapheme' }),
  );
}

function objectOf(schema: Schema): fc.Arbitrary<Record<string, unknown>> {
  const props = schema.properties ?? {};
  const names = Object.keys(props);
  if (names.length === 0 && typeof schema.additionalProperties === 'object') {
    return fc.dictionary(
      fc.stringMatching(/^[a-z][a-z0-9_]{0,15}$/),
      valueOf(schema.additionalProperties),
      {
        maxKeys: Math.min(schema.maxProperties ?? 4, 4),
      },
    );
  }
  const required = new Set(schema.required ?? []);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const k of names) model[k] = valueOf(props[k]!, k);
  return fc.record(model, { requiredKeys: names.filter((k) => required.has(k)) });
}

/** A request as generated: everything but the ids and times resolved when it runs. */
export interface GeneratedRequest {
  op: Operation;
  method: string;
  /** Path segments for the parameters, as text that goes into the URL unencoded. */
  pathParams: Record<string, unknown>;
  trailingSlash: boolean;
  /** Query pairs; a value of kind raw goes into the URL as written, the rest percent-encoded. */
  query: [string, unknown][];
  /** The body as a value, a raw text (`{ $token: 'raw' }`), or absent. */
  body: unknown;
  hasBody: boolean;
  contentType: string | undefined;
  idempotencyKey: string | Token | undefined;
  auth: 'valid' | 'none' | 'wrong' | 'malformed';
  /** What was changed from a valid request, for the report. */
  mutations: string[];
}

const hostilePathIds: readonly string[] = [
  '..',
  '.',
  '%2E%2E',
  '%00',
  'con_%00',
  '%2F',
  'a%2Fb',
  '%ED%A0%80',
  '%FF',
  '%',
  '%C3%BC%F0%9F%98%80',
  '%20',
  'null',
  'con_00000000000000000000000000',
  'x'.repeat(3_000),
  '%E2%80%AE',
];

function pathParamOf(op: Operation, p: Parameter): fc.Arbitrary<{ value: unknown; note?: string }> {
  const prefixes = prefixesForParam(op.path, p.name);
  // A parameter that names one of a few things (a channel) takes them; any other, an id.
  const valid = p.schema.enum
    ? fc.constantFrom(...p.schema.enum).map((v) => ({ value: v }))
    : fc.nat().map((i) => ({ value: idToken(prefixes, i) }));
  return fc.oneof(
    { arbitrary: valid, weight: 7 },
    {
      arbitrary: fc
        .constantFrom(...hostilePathIds)
        .map((v) => ({ value: raw(v), note: `path ${p.name} hostile` })),
      weight: 3,
    },
    {
      // An existing id with something after it: `%00` at its end, or another resource's id.
      arbitrary: fc
        .tuple(fc.nat(), fc.constantFrom('%00', '%20', '.json', '%2F..'))
        .map(([i, suffix]) => ({
          value: { $suffix: suffix, id: idToken(prefixes, i) },
          note: `path ${p.name} id+${suffix}`,
        })),
      weight: 1,
    },
    {
      arbitrary: fc.nat().map((i) => ({
        value: idToken(ALL_PREFIXES, i),
        note: `path ${p.name} id of any kind`,
      })),
      weight: 1,
    },
  );
}

const pageValues = [
  '1e20',
  'Infinity',
  '-Infinity',
  'NaN',
  '-1',
  '0',
  '1.5',
  '',
  '10000000',
  '10000001',
  '9007199254740993',
  '0x10',
  '1e3',
  ' 1',
];

function queryOf(
  op: Operation,
): fc.Arbitrary<{ pairs: [string, unknown][]; notes: string[]; valid: [string, unknown][] }> {
  const valid = fc.tuple(
    ...op.queryParams.map((p) =>
      fc.option(
        (p.name === 'page' ? fc.integer({ min: 1, max: 3 }) : valueOf(p.schema, p.name)).map(
          (v) => [p.name, v] as [string, unknown],
        ),
        { nil: undefined, freq: 2 },
      ),
    ),
  );
  const names = op.queryParams.map((p) => p.name);
  const mutation = fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 6 },
    {
      arbitrary: fc
        .tuple(fc.constantFrom('page', 'limit', ...names), fc.constantFrom(...pageValues))
        .map(([n, v]) => ({ pair: [n, v] as [string, unknown], note: `query ${n}=${v}` })),
      weight: 2,
    },
    {
      arbitrary: fc
        .tuple(
          fc.constantFrom('page', ...names, 'unknown_param'),
          fc.constantFrom(...hostileStrings, ...hostileDateTimes),
        )
        .map(([n, v]) => ({ pair: [n, v] as [string, unknown], note: `query ${n} hostile` })),
      weight: 2,
    },
    {
      arbitrary: fc
        .tuple(
          fc.constantFrom('page', ...names),
          fc.constantFrom('%FF', '%ED%A0%80', '%', '%zz', '%00', 'a%00'),
        )
        .map(([n, v]) => ({ pair: [n, raw(v)] as [string, unknown], note: `query ${n} raw ${v}` })),
      weight: 1,
    },
    {
      arbitrary: fc.constantFrom('search', 'Page', 'limit[]', '__proto__', '\u0000').map((n) => ({
        pair: [n, 'x'] as [string, unknown],
        note: `unknown query ${JSON.stringify(n)}`,
      })),
      weight: 1,
    },
  );
  return fc.tuple(valid, mutation, fc.boolean()).map(([pairs, m, duplicate]) => {
    const out = pairs.filter((p): p is [string, unknown] => p !== undefined);
    const notes: string[] = [];
    if (m) {
      out.push(m.pair);
      notes.push(m.note);
      if (duplicate && out.length > 1) {
        out.push(out[0]!);
        notes.push('query parameter repeated');
      }
    }
    return {
      pairs: out,
      notes,
      valid: pairs.filter((p): p is [string, unknown] => p !== undefined),
    };
  });
}

const rawBodies: readonly { text: string; label?: string; bytes?: boolean }[] = [
  { text: '{"name":"\xff\xfe"}', label: '{"name":"<bytes FF FE>"}', bytes: true },
  { text: '{"name":"\xed\xa0\x80"}', label: '{"name":"<bytes ED A0 80>"}', bytes: true },
  { text: '\xef\xbb\xbf{}', label: '<UTF-8 BOM>{}', bytes: true },
  { text: '' },
  { text: 'null' },
  { text: '[]' },
  { text: '"x"' },
  { text: '42' },
  { text: 'true' },
  { text: '{' },
  { text: '{"a":}' },
  { text: '\u0000' },
  { text: '{"__proto__":{"polluted":1}}' },
  { text: '{"constructor":{"prototype":{"polluted":1}}}' },
  { text: '\ufeff{}' },
  { text: '{"name":"a","name":"b"}' },
  { text: '{"\u0000":1}' },
  { text: '1e999' },
  { text: '['.repeat(10_000) + ']'.repeat(10_000), label: '<array nested 10000 deep>' },
  { text: '{"a":'.repeat(10_000) + '{}' + '}'.repeat(10_000), label: '<object nested 10000 deep>' },
  { text: '{"a":'.repeat(40) + '1' + '}'.repeat(40), label: '<object nested 40 deep>' },
];

type BodyChoice = { body: unknown; hasBody: boolean; notes: string[]; valid?: unknown };

function bodyOf(op: Operation): fc.Arbitrary<BodyChoice> {
  if (!op.body) {
    // An operation that takes no body: mostly none, sometimes one anyway.
    return fc.oneof(
      {
        arbitrary: fc.constant<BodyChoice>({ body: undefined, hasBody: false, notes: [] }),
        weight: 8,
      },
      {
        arbitrary: fc.constantFrom(...rawBodies).map((b): BodyChoice => ({
          body: b.bytes ? rawBytes(b.text, b.label ?? b.text) : raw(b.text, b.label),
          hasBody: true,
          notes: ['body on an operation without one'],
        })),
        weight: 1,
      },
      {
        arbitrary: fc.constant<BodyChoice>({
          body: { a: 1 },
          hasBody: true,
          notes: ['body on an operation without one'],
        }),
        weight: 1,
      },
    );
  }
  const valid = valueOf(op.body);
  return fc
    .tuple(
      valid,
      fc.nat(),
      fc.constantFrom(
        'none',
        'none',
        'none',
        'leaf',
        'leaf',
        'leaf',
        'drop',
        'unknown',
        'nested',
        'raw',
        'root',
        'key',
      ),
      hostileValue,
      fc.constantFrom(...rawBodies),
      fc.constantFrom(
        'extra',
        '\u0000',
        'a\u0000',
        '\ud800',
        'a'.repeat(300),
        '',
        '__proto__',
        'constructor',
        'Upper',
        'a b',
        '\u202e',
      ),
    )
    .map(([value, pick, kind, hostile, rawBody, key]): BodyChoice => ({
      ...mutateBody(value, pick, kind, hostile, rawBody, key),
      valid: value,
    }));
}

function mutateBody(
  value: unknown,
  pick: number,
  kind: string,
  hostile: unknown,
  rawBody: { text: string; label?: string; bytes?: boolean },
  key: string,
): BodyChoice {
  const paths = pathsOf(value);
  switch (kind) {
    case 'leaf': {
      if (paths.length === 0) return { body: hostile, hasBody: true, notes: ['root replaced'] };
      const path = paths[pick % paths.length]!;
      return {
        body: setAt(value, path, hostile),
        hasBody: true,
        notes: [`body ${path.join('.')} hostile`],
      };
    }
    case 'drop': {
      if (paths.length === 0) return { body: value, hasBody: true, notes: [] };
      const path = paths[pick % paths.length]!;
      return {
        body: setAt(value, path, undefined),
        hasBody: true,
        notes: [`body ${path.join('.')} dropped`],
      };
    }
    case 'unknown':
      return {
        body: { ...(value as object), [key]: hostile },
        hasBody: true,
        notes: [`body unknown field ${JSON.stringify(key.slice(0, 20))}`],
      };
    case 'nested': {
      const depth = [33, 1_000, 10_000][pick % 3]!;
      const path = paths.length > 0 ? paths[pick % paths.length]! : ['deep'];
      return {
        body: setAt(value, path, nested(depth, pick % 2 === 0 ? 'array' : 'object')),
        hasBody: true,
        notes: [`body ${path.join('.')} nested ${depth} deep`],
      };
    }
    case 'raw':
      return {
        body: rawBody.bytes
          ? rawBytes(rawBody.text, rawBody.label ?? rawBody.text)
          : raw(rawBody.text, rawBody.label),
        hasBody: true,
        notes: ['raw body'],
      };
    case 'key': {
      // A hostile key in any object of the body (custom_fields, audience, message, the root).
      const objects = [[], ...paths].filter((p) => {
        let v: unknown = value;
        for (const k of p) v = (v as Record<string | number, unknown>)[k];
        return v !== null && typeof v === 'object' && !Array.isArray(v) && !isToken(v);
      });
      const path = objects[pick % objects.length]!;
      let target: unknown = value;
      for (const k of path) target = (target as Record<string | number, unknown>)[k];
      const updated = { ...(target as object), [key]: 'x' };
      return {
        body: path.length === 0 ? updated : setAt(value, path, updated),
        hasBody: true,
        notes: [`body key ${JSON.stringify(key.slice(0, 20))} in ${path.join('.') || 'root'}`],
      };
    }
    case 'root':
      return { body: hostile, hasBody: true, notes: ['root replaced'] };
    default:
      return { body: value, hasBody: true, notes: [] };
  }
}

/** A request for `op`: valid values from its schemas, mutated with hostile ones some of the time. */
export function requestOf(op: Operation): fc.Arbitrary<GeneratedRequest> {
  const pathParams = fc.tuple(...op.pathParams.map((p) => pathParamOf(op, p)));
  return fc
    .record({
      // One request in four is left valid, so that resources get made and the paths behind
      // an existing id are reached; the others carry one or more of the mutations below.
      clean: fc.nat(3).map((n) => n === 0),
      validIds: fc.tuple(...op.pathParams.map(() => fc.nat())),
      pathParams,
      trailingSlash: fc.oneof(
        { arbitrary: fc.constant(false), weight: 6 },
        { arbitrary: fc.constant(true), weight: 1 },
      ),
      query: queryOf(op),
      body: bodyOf(op),
      contentType: fc.oneof(
        { arbitrary: fc.constant('application/json'), weight: 20 },
        {
          arbitrary: fc.constantFrom(
            undefined,
            'text/plain',
            'application/json; charset=utf-16',
            'application/x-www-form-urlencoded',
            'application/jsonx',
            'application/merge-patch+json',
          ),
          weight: 1,
        },
      ),
      idempotencyKey: fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 4 },
        { arbitrary: fc.constantFrom('fuzz-key-1', 'fuzz-key-2', 'fuzz-key-3'), weight: 2 },
        { arbitrary: fc.uuid(), weight: 2 },
        { arbitrary: fc.constantFrom('', ' ', 'a b', 'ü', 'k'.repeat(256), '\t'), weight: 1 },
      ),
      auth: fc.oneof(
        { arbitrary: fc.constant('valid' as const), weight: 30 },
        {
          arbitrary: fc.constantFrom('none' as const, 'wrong' as const, 'malformed' as const),
          weight: 1,
        },
      ),
      otherMethod: fc.oneof(
        { arbitrary: fc.constant(undefined), weight: 40 },
        {
          arbitrary: fc.constantFrom('PUT', 'PATCH', 'DELETE', 'GET', 'POST', 'OPTIONS', 'HEAD'),
          weight: 1,
        },
      ),
    })
    .map((g): GeneratedRequest => {
      if (g.clean) {
        const pathValues: Record<string, unknown> = {};
        op.pathParams.forEach((p, i) => {
          const n = g.validIds[i]!;
          pathValues[p.name] = p.schema.enum
            ? p.schema.enum[n % p.schema.enum.length]
            : idToken(prefixesForParam(op.path, p.name), n);
        });
        return {
          op,
          method: op.method,
          pathParams: pathValues,
          trailingSlash: false,
          query: g.query.valid,
          body: op.body ? g.body.valid : undefined,
          hasBody: op.body !== undefined,
          contentType: op.body ? 'application/json' : undefined,
          idempotencyKey:
            op.method === 'POST' &&
            typeof g.idempotencyKey === 'string' &&
            /^[\x21-\x7e]{1,255}$/.test(g.idempotencyKey)
              ? g.idempotencyKey
              : undefined,
          auth: 'valid',
          mutations: [],
        };
      }
      const mutations = [...g.query.notes, ...g.body.notes];
      const pathValues: Record<string, unknown> = {};
      op.pathParams.forEach((p, i) => {
        const { value, note } = g.pathParams[i]!;
        pathValues[p.name] = value;
        if (note) mutations.push(note);
      });
      if (g.trailingSlash) mutations.push('trailing slash');
      if (g.contentType !== 'application/json')
        mutations.push(`content-type ${String(g.contentType)}`);
      if (g.auth !== 'valid') mutations.push(`auth ${g.auth}`);
      const method = g.otherMethod ?? op.method;
      if (method !== op.method) mutations.push(`method ${method}`);
      return {
        op,
        method,
        pathParams: pathValues,
        trailingSlash: g.trailingSlash,
        query: g.query.pairs,
        body: g.body.body,
        hasBody: g.body.hasBody,
        contentType: g.body.hasBody ? g.contentType : undefined,
        idempotencyKey: g.idempotencyKey,
        auth: g.auth,
        mutations,
      };
    });
}
