import type pg from 'pg';
import { monotonicFactory } from 'ulid';
import { runLoad } from './load.js';

const SEED_TIMEOUT_S = 600;

/**
 * +1, a 3-digit area code and 7 digits, distinct for every `n` below 9,999,000 and never
 * ending in 0000 (the sandbox fails deliveries to those phones, a path of its own).
 */
export function benchPhone(area: number, n: number): string {
  const block = Math.floor(n / 9_999);
  const last4 = (n % 9_999) + 1;
  if (block > 999) throw new Error(`benchPhone: ${n} is out of range`);
  return `+1${area}${String(block).padStart(3, '0')}${String(last4).padStart(4, '0')}`;
}

/**
 * Creates `count` contacts through POST /v1/contacts with autocannon, `concurrency` requests in
 * flight, bodies from `bodyOf(0…count-1)`; returns their ids. Any status but 201 fails the run.
 */
export async function seedContacts(
  baseUrl: string,
  apiKey: string,
  count: number,
  concurrency: number,
  bodyOf: (n: number) => Record<string, unknown>,
): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await runLoad(
    {
      name: 'seed POST /v1/contacts',
      url: baseUrl,
      requests: [
        {
          method: 'POST',
          path: '/v1/contacts',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          setupRequest: (req) => {
            req.body = JSON.stringify(bodyOf(next++));
            return req;
          },
          onResponse: (status, body) => {
            if (status === 201) ids.push((JSON.parse(body) as { id: string }).id);
          },
        },
      ],
      expectedStatuses: [201],
    },
    { amount: count, connections: Math.min(concurrency, count), durationS: SEED_TIMEOUT_S },
  );
  if (ids.length !== count || new Set(ids).size !== count) {
    throw new Error(
      `seeding returned ${ids.length} ids (${new Set(ids).size} distinct), expected ${count}`,
    );
  }
  return ids;
}

const INSERT_CHUNK = 10_000;

/**
 * Inserts `count` contacts tagged `tag` straight into PostgreSQL (phones `benchPhone(area, i)`),
 * 10,000 rows a statement, then the tag and ANALYZE; returns their ids in insertion order.
 * Much faster than the API for audiences of 100,000 and more.
 */
export async function insertTaggedContacts(
  pool: pg.Pool,
  opts: { accountId: string; tag: string; count: number; area: number; namePrefix: string },
): Promise<string[]> {
  const ulid = monotonicFactory();
  const ids: string[] = [];
  const createdAt = new Date(Date.now() - 1_000);
  for (let from = 0; from < opts.count; from += INSERT_CHUNK) {
    const chunk: string[] = [];
    const phones: string[] = [];
    const names: string[] = [];
    for (let i = from; i < Math.min(opts.count, from + INSERT_CHUNK); i++) {
      chunk.push(`con_${ulid()}`);
      phones.push(benchPhone(opts.area, i));
      names.push(`${opts.namePrefix} ${String(i).padStart(7, '0')}`);
    }
    await pool.query(
      `INSERT INTO contacts (account_id, id, phone, name, tags, custom_fields, created_at, updated_at)
       SELECT $1, c.id, c.phone, c.name, ARRAY[$2]::text[], '{}'::jsonb, $3, $3
       FROM unnest($4::text[], $5::text[], $6::text[]) AS c(id, phone, name)`,
      [opts.accountId, opts.tag, createdAt, chunk, phones, names],
    );
    ids.push(...chunk);
  }
  await pool.query(
    `INSERT INTO tags (account_id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    [opts.accountId, opts.tag, createdAt],
  );
  // Planner statistics for the new rows now, rather than whenever autovacuum gets to them.
  await pool.query('ANALYZE contacts');
  return ids;
}
