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
