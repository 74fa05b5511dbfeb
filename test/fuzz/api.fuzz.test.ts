import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import {
  ADMIN_TOKEN,
  createPrivateDatabase,
  newAccount,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import {
  headsOf,
  HIDDEN_OPERATIONS,
  operationsOf,
  requestOf,
  type GeneratedRequest,
  type Operation,
} from './requests.js';
import { asText, isToken, serialize, type Token } from './values.js';

/*
 * Drives every operation of the service's own OpenAPI document (GET /v1/openapi.json, so the
 * fuzzer never drifts from the routes), the routes it hides (provider webhooks, /metrics,
 * /widget.js) and HEAD of every GET, with generated requests: valid values from each schema,
 * often mutated with hostile ones. For every request it asserts that the answer is not a 5xx,
 * that a 4xx is the documented error envelope with a code of src/errors.ts and its status, and
 * that a refused request wrote nothing: every table of the database is fingerprinted before and
 * after. The one write a refused request may make is the stored response of its Idempotency-Key
 * (DESIGN.md: every completed response but 429 and 5xx is stored and replayed), so that table is
 * compared row by row and may gain or complete exactly that one record, with the status answered.
 *
 * The run is stateful: valid requests succeed often enough to create resources, their ids join
 * the pools that path ids and body ids are drawn from, so the paths behind an existing id are
 * reached too. The database is private to this file, so no other file's writes move the counts.
 *
 * FUZZ_RUNS (default 2000) and FUZZ_SEED (default fixed) make longer or other runs; FUZZ_PATH
 * replays the shrunk counterexample fast-check reports; FUZZ_KEEP_GOING=1 runs to the end and
 * lists every finding instead of stopping (and shrinking) at the first.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_123);
const PATH = process.env.FUZZ_PATH;
const KEEP_GOING = process.env.FUZZ_KEEP_GOING === '1';

const ID = /^(acc|key|con|conv|msg|note|bc|wh|evt|usr|team|tpl|job|dlv)_[0-9A-Z]{26}$/;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

let t: TestApp;
let drop: () => Promise<void>;
let fuzz: TestAccount;
let ops: Operation[];
const pools = new Map<string, string[]>();
/** Ids a DELETE took away: drawn now and then only, so most ids drawn still exist. */
const gone = new Set<string>();
const phones: string[] = [];
const templateNames: string[] = [];
let phoneCounter = 0;
let tables: string[] = [];

function remember(id: string) {
  if (id === fuzz.accountId || id === fuzz.keyId) return; // the admin API must never lock us out
  const prefix = id.slice(0, id.indexOf('_'));
  const pool = pools.get(prefix) ?? [];
  if (!pool.includes(id)) pool.push(id);
  pools.set(prefix, pool);
}

/** Every id in a response, and the phones and template names a later request may reuse. */
function harvest(value: unknown, key?: string) {
  if (typeof value === 'string') {
    if (ID.test(value)) remember(value);
    else if (key === 'phone' && !phones.includes(value)) phones.push(value);
  } else if (Array.isArray(value)) {
    value.forEach((v) => harvest(v));
  } else if (value !== null && typeof value === 'object') {
    const o = value as Record<string, unknown>;
    if (typeof o.id === 'string' && o.id.startsWith('tpl_') && typeof o.name === 'string') {
      if (!templateNames.includes(o.name)) templateNames.push(o.name);
    }
    for (const [k, v] of Object.entries(o)) harvest(v, k);
  }
}

function resolve(token: Token): unknown {
  switch (token.$token) {
    case 'id': {
      const all = token.prefixes.flatMap((p) => pools.get(p) ?? []);
      const live = all.filter((id) => !gone.has(id));
      const ids = token.n % 6 === 0 || live.length === 0 ? all : live;
      if (ids.length === 0) return `${token.prefixes[0]}_${String(token.n % 10).padStart(26, '0')}`;
      return ids[token.n % ids.length];
    }
    case 'phone':
      // One in four is a phone already taken (409), the rest are fresh.
      if (token.n % 4 === 0 && phones.length > 0) return phones[token.n % phones.length];
      phoneCounter++;
      return `+1415${String(5_000_000 + phoneCounter).padStart(7, '0')}`;
    case 'template_name':
      return token.n % 5 === 0 || templateNames.length === 0
        ? 'no_such_template'
        : templateNames[token.n % templateNames.length];
    case 'future':
      return new Date(t.clock.now().getTime() + token.minutes * 60_000).toISOString();
    case 'raw':
      return token.text;
  }
}

function encodeLoose(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    // A lone surrogate: send the bytes a careless client would (U+FFFD), percent-encoded.
    return [...Buffer.from(text, 'utf8')]
      .map((b) => `%${b.toString(16).padStart(2, '0')}`)
      .join('');
  }
}

interface Materialized {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload: string | Buffer | undefined;
  idempotencyKey: string | undefined;
  mutations: string[];
}

function materialize(g: GeneratedRequest): Materialized {
  let path = g.op.path;
  for (const [name, value] of Object.entries(g.pathParams)) {
    let text: string;
    if (isToken(value) && value.$token === 'raw') text = value.text;
    else if (value !== null && typeof value === 'object' && '$suffix' in value) {
      const v = value as { $suffix: string; id: Token };
      text = encodeLoose(asText(v.id, resolve)) + v.$suffix;
    } else text = encodeLoose(asText(value, resolve));
    path = path.replace(`{${name}}`, text);
  }
  if (g.trailingSlash) path += '/';
  const query = g.query
    .map(([k, v]) => {
      const value = isToken(v) && v.$token === 'raw' ? v.text : encodeLoose(asText(v, resolve));
      return `${encodeLoose(k)}=${value}`;
    })
    .join('&');
  const headers: Record<string, string> = {};
  const secret = g.op.admin ? ADMIN_TOKEN : fuzz.apiKey;
  if (g.auth === 'valid') headers.authorization = `Bearer ${secret}`;
  else if (g.auth === 'wrong') headers.authorization = `Bearer ${secret}x`;
  else if (g.auth === 'malformed') headers.authorization = `Basic ${secret}`;
  if (g.contentType !== undefined) headers['content-type'] = g.contentType;
  const idempotencyKey =
    g.idempotencyKey === undefined ? undefined : asText(g.idempotencyKey, resolve);
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  return {
    method: g.method,
    url: query ? `${path}?${query}` : path,
    headers,
    payload: !g.hasBody
      ? undefined
      : isToken(g.body) && g.body.$token === 'raw' && g.body.bytes
        ? Buffer.from(g.body.text, 'latin1')
        : serialize(g.body, resolve),
    idempotencyKey,
    mutations: g.mutations,
  };
}

function clip(text: string, max = 800): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max / 2)} …(${text.length} chars in all)… ${text.slice(-max / 4)}`;
}

/** The request as a reader can replay it (values JSON-escaped so control characters show). */
function describeRequest(r: Materialized): string {
  const headers = { ...r.headers };
  if (headers.authorization) {
    headers.authorization = headers.authorization.replace(fuzz.apiKey, '<fuzz api key>');
  }
  return [
    `${r.method} ${JSON.stringify(clip(r.url, 400))}`,
    `headers: ${JSON.stringify(headers)}`,
    `body: ${
      r.payload === undefined
        ? '(none)'
        : typeof r.payload === 'string'
          ? JSON.stringify(clip(r.payload))
          : `bytes ${r.payload.toString('hex')}`
    }`,
    `generated as: ${r.mutations.length ? r.mutations.join('; ') : 'valid'}`,
  ].join('\n  ');
}

function describeResponse(res: LightMyRequestResponse): string {
  return `${res.statusCode} ${String(res.headers['content-type'] ?? '')} ${clip(res.body, 1200)}`;
}

type Fingerprint = Map<string, string>;

/** Every table's row count and a hash of its rows; idempotency keys row by row. */
async function fingerprint(): Promise<{ tables: Fingerprint; keys: Map<string, KeyRow> }> {
  const parts = tables.map(
    (name) =>
      `SELECT '${name}' AS t, count(*)::int AS n, md5(coalesce(string_agg(md5(x::text), '' ORDER BY md5(x::text)), '')) AS h FROM "${name}" x`,
  );
  const { rows } = await sql
    .raw<{ t: string; n: number; h: string }>(parts.join(' UNION ALL '))
    .execute(t.db);
  const keys = await sql<KeyRow & { id: string }>`
    SELECT account_id || ' ' || method || ' ' || path || ' ' || key AS id, account_id, method, key,
      state, response_status, md5(x::text) AS h
    FROM idempotency_keys x`.execute(t.db);
  return {
    tables: new Map(rows.map((r) => [r.t, `${r.n} rows, ${r.h}`])),
    keys: new Map(keys.rows.map((r) => [r.id, r])),
  };
}
interface KeyRow {
  account_id: string;
  method: string;
  key: string;
  state: string;
  response_status: number | null;
  h: string;
}

/** What is wrong with the error envelope of a 4xx. */
function envelopeProblems(res: LightMyRequestResponse): string[] {
  const found: string[] = [];
  const status = res.statusCode;
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    return [`envelope: a ${status} whose body is not JSON`];
  }
  if (!String(res.headers['content-type'] ?? '').startsWith('application/json')) {
    found.push(`envelope: content-type ${String(res.headers['content-type'])}`);
  }
  const error = (body as { error?: unknown }).error as
    { code?: unknown; message?: unknown; details?: unknown } | undefined;
  if (typeof error !== 'object' || error === null || Object.keys(body as object).length !== 1) {
    found.push('envelope: not { error: {...} }');
  } else {
    const code = error.code;
    if (typeof code !== 'string' || !(code in ERROR_STATUS)) {
      found.push(`envelope: code ${JSON.stringify(code)} is not one of src/errors.ts`);
    } else {
      const expected: number[] =
        code === 'idempotency_error'
          ? [409, 422]
          : [ERROR_STATUS[code as keyof typeof ERROR_STATUS]];
      if (!expected.includes(status)) found.push(`envelope: code ${code} with status ${status}`);
    }
    if (typeof error.message !== 'string' || error.message.length === 0) {
      found.push('envelope: message missing');
    }
    if (error.details !== undefined) {
      const ok =
        Array.isArray(error.details) &&
        error.details.every(
          (d: unknown) =>
            typeof d === 'object' &&
            d !== null &&
            typeof (d as { field?: unknown }).field === 'string' &&
            typeof (d as { issue?: unknown }).issue === 'string',
        );
      if (!ok) found.push('envelope: details are not [{ field, issue }]');
    }
  }

  return found;
}

/** What is wrong with one exchange, or nothing. */
function problems(
  r: Materialized,
  res: LightMyRequestResponse,
  before: Awaited<ReturnType<typeof fingerprint>>,
  after: Awaited<ReturnType<typeof fingerprint>>,
): string[] {
  const found: string[] = [];
  const status = res.statusCode;
  if (status >= 500) return [`5xx: answered ${status}`];
  if (status < 400) return found;
  // A HEAD answer has no body (RFC 9110): its envelope cannot be seen, its status and writes can.
  if (r.method !== 'HEAD') found.push(...envelopeProblems(res));

  for (const [table, print] of after.tables) {
    if (before.tables.get(table) !== print) {
      found.push(`row written: ${table} went from ${before.tables.get(table)} to ${print}`);
    }
  }
  const changed = [...after.keys]
    .filter(([id, row]) => before.keys.get(id)?.h !== row.h)
    .map(([, row]) => row);
  const removed = [...before.keys.keys()].filter((k) => !after.keys.has(k));
  const mayStore =
    r.method === 'POST' && r.idempotencyKey !== undefined && KEY_PATTERN.test(r.idempotencyKey);
  const allowed =
    mayStore &&
    changed.length <= 1 &&
    changed.every(
      (row) =>
        row.account_id === fuzz.accountId &&
        row.key === r.idempotencyKey &&
        row.state === 'completed' &&
        row.response_status === status,
    );
  if ((changed.length > 0 && !allowed) || removed.length > 0) {
    found.push(
      `row written: idempotency_keys ${JSON.stringify({ changed, removed: removed.length })}`,
    );
  }
  return found;
}

async function send(r: Materialized): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: r.method as 'GET',
    url: r.url,
    headers: r.headers,
    ...(r.payload === undefined ? {} : { payload: r.payload }),
  });
}

/** A valid request that must succeed; its ids join the pools. */
async function seed(method: string, url: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await t.app.inject({
    method: method as 'POST',
    url,
    headers: {
      authorization: `Bearer ${url.startsWith('/admin') ? ADMIN_TOKEN : fuzz.apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  const json = res.json<Record<string, unknown>>();
  harvest(json);
  return json;
}

beforeAll(async () => {
  const db = await createPrivateDatabase();
  drop = db.drop;
  // The event stream ends by itself soon after it starts: inject waits for a response's end.
  t = await startTestApp({ databaseUrl: db.url, eventStreams: { maxLifetimeMs: 20 } });
  // A limit no run reaches: a 429 would hide what the request itself does.
  fuzz = await newAccount(t, { rateLimit: 1_000_000 });

  const doc = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  const documented = operationsOf(doc.json());
  ops = [...documented, ...HIDDEN_OPERATIONS, ...headsOf([...documented, ...HIDDEN_OPERATIONS])];

  const { rows } = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
      AND table_name NOT LIKE 'kysely_%' AND table_name <> 'idempotency_keys'
      -- A refused sign-in is recorded by design: the brute-force limits count those rows.
      AND table_name <> 'sign_in_failures'
    ORDER BY table_name`.execute(t.db);
  tables = rows.map((r) => r.table_name);

  // A few real resources of each kind, so path ids and body ids reach the stateful paths.
  await seed('POST', '/v1/webhooks', {
    url: 'https://127.0.0.1:1/hook',
    events: ['contact.created', 'message.received', 'conversation.assigned'],
  });
  const user = await seed('POST', '/v1/users', { name: 'Ada', email: 'ada@example.com' });
  await seed('POST', '/v1/teams', { name: 'Support', user_ids: [user.id] });
  const contact = await seed('POST', '/v1/contacts', {
    phone: '+14155550100',
    name: 'Grace',
    tags: ['vip'],
    custom_fields: { plan: 'gold', seats: 3 },
  });
  const inbound = await seed('POST', '/v1/sandbox/inbound', {
    channel: 'whatsapp',
    contact_id: contact.id,
    type: 'text',
    content: 'hello',
  });
  await seed('POST', `/v1/conversations/${String(inbound.conversation_id)}/notes`, {
    content: 'first note',
  });
  const template = await seed('POST', '/v1/templates', {
    name: 'order_update',
    body: 'Your order {{1}} has shipped',
  });
  await seed('POST', `/v1/sandbox/templates/${String(template.id)}/review`, { status: 'approved' });
  const sent = await seed('POST', '/v1/messages/send', {
    contact_id: contact.id,
    channel: 'whatsapp',
    type: 'text',
    content: 'hi there',
  });
  harvest(sent);
  await seed('POST', '/v1/broadcasts', {
    name: 'Later',
    channel: 'whatsapp',
    audience: { tags: ['vip'] },
    message: { type: 'text', content: 'news' },
    scheduled_at: new Date(t.clock.now().getTime() + 3_600_000).toISOString(),
  });
  const webhook = (pools.get('wh') ?? [])[0]!;
  await seed('GET', `/v1/webhooks/${webhook}/deliveries`);
  // Another account, the target of the admin operations (never the fuzz account itself).
  await seed('POST', '/admin/accounts', { name: 'Other', plan: 'starter' });
  const other = (pools.get('acc') ?? [])[0]!;
  await seed('POST', `/admin/accounts/${other}/api-keys`, { name: 'spare' });
}, 120_000);

afterAll(async () => {
  await t?.close();
  await drop?.();
});

describe('the API under generated requests', () => {
  it('has an oracle that sees a write, and allows only the idempotency record of a refusal', async () => {
    const conversation = (pools.get('conv') ?? [])[0]!;
    const r: Materialized = {
      method: 'POST',
      url: `/v1/conversations/${conversation}/notes`,
      headers: { authorization: `Bearer ${fuzz.apiKey}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ content: 'oracle check' }),
      idempotencyKey: 'oracle-check-key',
      mutations: [],
    };
    const before = await fingerprint();
    const res = await send({
      ...r,
      headers: { ...r.headers, 'idempotency-key': 'oracle-check-key' },
    });
    expect(res.statusCode).toBe(201);
    const after = await fingerprint();
    // Judged as if it had been refused: the note (and its record's success status) are writes.
    const refused = { ...res, statusCode: 422, body: res.body };
    const found = problems(r, refused, before, after);
    expect(found.join('\n')).toMatch(/row written: notes/);
    expect(found.join('\n')).toMatch(/row written: idempotency_keys/);
    // Nothing written: nothing found, whatever the status.
    expect(
      problems(r, refused, after, await fingerprint()).filter((f) => f.startsWith('row')),
    ).toEqual([]);
  });

  it(
    `answers every operation of its OpenAPI document with no 5xx, the error envelope, and no write on refusal (${RUNS} runs, seed ${SEED})`,
    async () => {
      expect(ops.length).toBeGreaterThan(30);
      for (const prefix of ['con', 'conv', 'msg', 'usr', 'team', 'tpl', 'wh', 'bc', 'acc', 'key']) {
        expect(pools.get(prefix)?.length ?? 0, `seeded ${prefix}`).toBeGreaterThan(0);
      }
      const seen = new Map<string, { count: number; statuses: Map<number, number> }>();
      const findings: string[] = [];
      let last: Awaited<ReturnType<typeof fingerprint>> | null = null;

      const property = fc.asyncProperty(fc.oneof(...ops.map(requestOf)), async (g) => {
        const r = materialize(g);
        const before = last ?? (await fingerprint());
        last = null;
        const res = await send(r);
        const after = await fingerprint();
        last = after;

        const name = `${g.op.method} ${g.op.path}`;
        const entry = seen.get(name) ?? { count: 0, statuses: new Map() };
        entry.count++;
        entry.statuses.set(res.statusCode, (entry.statuses.get(res.statusCode) ?? 0) + 1);
        seen.set(name, entry);
        if (res.statusCode < 300 && r.method === 'DELETE') {
          const id = decodeURIComponent(r.url.split('?')[0]!.replace(/\/$/, '').split('/').pop()!);
          gone.add(id);
        }
        if (res.statusCode < 300 && res.body) {
          try {
            harvest(JSON.parse(res.body));
          } catch {
            // Not JSON: nothing to learn from it (a 2xx is not judged here).
          }
        }

        if (process.env.FUZZ_VERBOSE === '2' && r.mutations.length === 0 && res.statusCode >= 400) {
          console.log(`valid refused: ${describeRequest(r)}\n  -> ${describeResponse(res)}`);
        }
        const found = problems(r, res, before, after);
        if (found.length === 0) return;
        const report = `${found.join('\n')}\nrequest (operation ${name}):\n  ${describeRequest(r)}\nresponse: ${describeResponse(res)}`;
        if (KEEP_GOING) findings.push(report);
        else throw new Error(report);
      });

      const details = await fc.check(property, {
        seed: SEED,
        numRuns: RUNS,
        ...(PATH ? { path: PATH } : {}),
        // Shrinking replays requests against a database the run keeps changing: bounded.
        interruptAfterTimeLimit: RUNS * 400,
        markInterruptAsFailure: false,
      });
      if (details.failed) {
        throw new Error(
          `fuzz finding (replay with FUZZ_SEED=${details.seed} FUZZ_PATH=${details.counterexamplePath ?? ''} FUZZ_RUNS=${RUNS}):\n${
            details.errorInstance instanceof Error
              ? details.errorInstance.message
              : String(details.errorInstance)
          }`,
        );
      }
      if (process.env.FUZZ_VERBOSE === '1') {
        for (const [name, s] of [...seen].sort()) {
          console.log(name, s.count, JSON.stringify(Object.fromEntries(s.statuses)));
        }
      }
      if (findings.length > 0) {
        throw new Error(`${findings.length} findings:\n\n${findings.join('\n\n')}`);
      }
      // Every operation was driven (the default run is long enough for it).
      if (!PATH && RUNS >= 500) {
        const missed = ops.map((o) => `${o.method} ${o.path}`).filter((n) => !seen.has(n));
        expect(missed).toEqual([]);
      }
    },
    Math.max(120_000, RUNS * 500),
  );
});
