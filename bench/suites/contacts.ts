import { startBareServer } from '../lib/bare.js';
import { expectJson } from '../lib/http.js';
import { measureAgainstBaseline, type LoadTarget } from '../lib/load.js';
import { seedContacts } from '../lib/seed.js';
import type { Suite } from '../lib/suite.js';

const SEED_COUNT = 10_000;
const SEED_CONCURRENCY = 20;
const PHONE_MAX = 9_999_999;

/** +1415 and a 7-digit counter: unique in the account, and a possible NANP number. */
function phone(n: number): string {
  return `+1415${String(n).padStart(7, '0')}`;
}

export const contactsSuite: Suite = {
  name: 'contacts',
  description: `contacts API on ${SEED_COUNT.toLocaleString('en-US')} seeded contacts, against a bare Fastify route`,
  async run(ctx) {
    const { service } = ctx;
    const account = await service.createAccount('bench contacts');
    const auth = { authorization: `Bearer ${account.apiKey}` };

    const seedStart = performance.now();
    const ids = await seedContacts(
      service.url,
      account.apiKey,
      SEED_COUNT,
      SEED_CONCURRENCY,
      (n) => ({
        phone: phone(n),
        name: `Bench Contact ${String(n).padStart(5, '0')}`,
      }),
    );
    const seedS = (performance.now() - seedStart) / 1000;
    ctx.log(
      `seeded ${ids.length} contacts in ${seedS.toFixed(1)} s ` +
        `(${(ids.length / seedS).toFixed(0)}/s, ${SEED_CONCURRENCY} concurrent POSTs via autocannon) into account ${account.accountId}`,
    );
    const page = await expectJson(200, `${service.url}/v1/contacts?limit=1`, {
      token: account.apiKey,
    });
    if (page.total !== SEED_COUNT) {
      throw new Error(
        `expected ${SEED_COUNT} contacts in the account, the list says ${JSON.stringify(page.total)}`,
      );
    }

    // The baseline answers a real contact of this account: same shape, same size.
    const sample = await expectJson(200, `${service.url}/v1/contacts/${ids[0] ?? ''}`, {
      token: account.apiKey,
    });
    ctx.log(`contact body: ${Buffer.byteLength(JSON.stringify(sample))} bytes`);
    const bare = await startBareServer(ctx.projectRoot, sample);
    ctx.defer(() => bare.stop());

    let nextId = 0;
    // Unique phones for creates, after the seeded ones; shared by all connections and runs.
    let nextPhone = SEED_COUNT;
    const targets: LoadTarget[] = [
      { name: 'bare Fastify GET (baseline)', url: bare.url },
      {
        name: 'GET /v1/contacts/{id}',
        url: service.url,
        requests: [
          {
            method: 'GET',
            headers: auth,
            setupRequest: (req) => {
              req.path = `/v1/contacts/${ids[nextId++ % ids.length] ?? ''}`;
              return req;
            },
          },
        ],
        expectedStatuses: [200],
      },
      {
        name: 'GET /v1/contacts?limit=20',
        url: `${service.url}/v1/contacts?limit=20`,
        headers: auth,
        expectedStatuses: [200],
      },
      {
        name: 'POST /v1/contacts',
        url: service.url,
        requests: [
          {
            method: 'POST',
            path: '/v1/contacts',
            headers: { ...auth, 'content-type': 'application/json' },
            setupRequest: (req) => {
              // Past PHONE_MAX the phones would repeat: the 409s then fail the run loudly.
              const n = nextPhone++ % (PHONE_MAX + 1);
              req.body = JSON.stringify({ phone: phone(n), name: `Bench Create ${n}` });
              return req;
            },
          },
        ],
        expectedStatuses: [201],
      },
    ];

    await measureAgainstBaseline(ctx, targets);
    await bare.stop();
  },
};
