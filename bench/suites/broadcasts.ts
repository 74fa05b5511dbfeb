import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { expectJson, stringField } from '../lib/http.js';
import { runLoad, type LoadFigures, type LoadTarget } from '../lib/load.js';
import { fmt, fmtInt, formatTable, median } from '../lib/report.js';
import { RssSampler } from '../lib/rss.js';
import { insertTaggedContacts } from '../lib/seed.js';
import type { Suite } from '../lib/suite.js';

const TAG = 'bench-audience';
const POLL_MS = 250;
const PROGRESS_EVERY_MS = 5_000;
const RSS_INTERVAL_MS = 250;
/** Reads run this long before the broadcast is created: the RSS baseline is taken under them. */
const BASELINE_MS = 1_000;
const MIB = 1024 * 1024;
const TARGET_RECIPIENTS_PER_S = 5_000;
const TARGET_RSS_GROWTH_MIB = 200;
const TARGET_READ_P99_MS = 50;

interface BroadcastBody {
  status?: unknown;
  stats?: { sent?: unknown; failed?: unknown };
}

function statsOf(b: BroadcastBody): { sent: number; failed: number } {
  return { sent: Number(b.stats?.sent ?? NaN), failed: Number(b.stats?.failed ?? NaN) };
}

export const broadcastsSuite: Suite = {
  name: 'broadcasts',
  description:
    'fan-out of an immediate text broadcast on webchat to a tag of seeded contacts, with contact reads alongside',
  // The sandbox would otherwise queue delivered/read jobs for every message: measure the fan-out.
  serviceEnv: { SANDBOX_AUTO_ADVANCE: 'false' },
  async run(ctx) {
    const { service, settings } = ctx;
    const n = settings.broadcastContacts;
    const account = await service.createAccount('bench broadcasts');
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    // Seed the audience straight into PostgreSQL, in chunks of one statement each.
    const seedStart = performance.now();
    const ids = await insertTaggedContacts(pool, {
      accountId: account.accountId,
      tag: TAG,
      count: n,
      area: 646,
      namePrefix: 'Bench Audience',
    });
    const seedS = (performance.now() - seedStart) / 1000;
    const listed = await expectJson(
      200,
      `${service.url}/v1/contacts?tag=${encodeURIComponent(TAG)}&limit=1`,
      { token: account.apiKey, timeoutMs: 60_000 },
    );
    if (listed.total !== n) {
      throw new Error(
        `expected ${n} contacts tagged ${TAG}, the list says ${JSON.stringify(listed.total)}`,
      );
    }
    ctx.log(
      `seeded ${fmtInt(n)} contacts tagged "${TAG}" in ${seedS.toFixed(1)} s (bulk SQL insert, ` +
        `10,000 rows a statement, then ANALYZE) into account ${account.accountId}`,
    );
    const batchSize =
      service.extraEnv.BROADCAST_BATCH_SIZE ?? process.env.BROADCAST_BATCH_SIZE ?? '500 (default)';
    ctx.log(
      `service: SANDBOX_AUTO_ADVANCE=false, so no delivered/read jobs follow the messages and the ` +
        `figures are the fan-out itself; BROADCAST_BATCH_SIZE=${batchSize}`,
    );

    const readRate = settings.broadcastReadRate;
    const readConnections = settings.broadcastReadConnections;
    let nextRead = 0;
    const reads: LoadTarget = {
      name: 'GET /v1/contacts/{id}',
      url: service.url,
      requests: [
        {
          method: 'GET',
          headers: { authorization: `Bearer ${account.apiKey}` },
          setupRequest: (req) => {
            // A stride through the audience, so reads spread over the table.
            req.path = `/v1/contacts/${ids[(nextRead++ * 7_919) % ids.length] ?? ''}`;
            return req;
          },
        },
      ],
      expectedStatuses: [200],
    };
    const readOpts = {
      connections: readConnections,
      ...(readRate > 0 ? { overallRate: readRate } : {}),
    };
    const readsLabel =
      `autocannon, ${readConnections} connections, ` +
      (readRate > 0 ? `at most ${readRate}/s` : 'unthrottled');

    // The same reads with no broadcast, for comparison.
    if (settings.warmupS > 0) await runLoad(reads, { ...readOpts, durationS: settings.warmupS });
    const idle = await runLoad(reads, { ...readOpts, durationS: settings.durationS });
    ctx.log(
      `reads with no broadcast (${readsLabel}, ${settings.durationS} s): ${fmtInt(idle.reqPerSec)} req/s, ` +
        `p50 ${fmt(idle.p50Ms, 2)} ms, p99 ${fmt(idle.p99Ms, 2)} ms`,
    );

    const sampler = new RssSampler(service.pid, RSS_INTERVAL_MS);
    sampler.start();
    ctx.defer(() => sampler.stop());
    const stopReads = new AbortController();
    let recording = false;
    const during: Promise<{ figures?: LoadFigures; error?: Error }> = runLoad(reads, {
      ...readOpts,
      durationS: settings.waitTimeoutS + 60,
      signal: stopReads.signal,
      recordLatency: () => recording,
    }).then(
      (figures) => ({ figures }),
      (error: unknown) => ({ error: error instanceof Error ? error : new Error(String(error)) }),
    );
    ctx.defer(async () => stopReads.abort());
    await delay(BASELINE_MS);

    const created = performance.now();
    recording = true;
    const broadcast = await expectJson(201, `${service.url}/v1/broadcasts`, {
      method: 'POST',
      token: account.apiKey,
      body: {
        name: 'Bench broadcast',
        channel: 'webchat',
        audience: { tags: [TAG] },
        message: { type: 'text', content: 'Spring sale: 20% off everything until Sunday.' },
      },
    });
    const broadcastId = stringField(broadcast, 'id');
    if (broadcast.status !== 'sending') {
      throw new Error(
        `the broadcast was created ${JSON.stringify(broadcast.status)}, expected sending`,
      );
    }
    const rssBaseline = median(sampler.between(created - BASELINE_MS, created));
    ctx.log(`broadcast ${broadcastId} created; polling it every ${POLL_MS} ms`);

    const deadline = Date.now() + settings.waitTimeoutS * 1000;
    let lastLogAt = Date.now();
    let state: BroadcastBody = broadcast;
    let done = NaN;
    for (;;) {
      await delay(POLL_MS);
      state = await expectJson(200, `${service.url}/v1/broadcasts/${broadcastId}`, {
        token: account.apiKey,
      });
      if (state.status !== 'sending') {
        done = performance.now();
        break;
      }
      if (Date.now() - lastLogAt >= PROGRESS_EVERY_MS) {
        lastLogAt = Date.now();
        const { sent, failed } = statsOf(state);
        const rss = sampler.peakSince(performance.now() - PROGRESS_EVERY_MS);
        ctx.log(
          `  ${fmtInt(sent + failed)}/${fmtInt(n)} recipients after ` +
            `${((performance.now() - created) / 1000).toFixed(1)} s, RSS ${fmt(rss / MIB, 0)} MiB`,
        );
      }
      if (Date.now() > deadline) {
        throw new Error(
          `broadcast ${broadcastId} still sending after ${settings.waitTimeoutS} s (BENCH_WAIT_TIMEOUT): ` +
            JSON.stringify(state.stats),
        );
      }
    }
    recording = false;
    stopReads.abort();
    const readOutcome = await during;
    await sampler.stop();
    if (readOutcome.error !== undefined) throw readOutcome.error;
    const duringReads = readOutcome.figures;

    const { sent, failed } = statsOf(state);
    if (state.status !== 'sent' || sent !== n || failed !== 0) {
      throw new Error(
        `broadcast ${broadcastId} ended ${JSON.stringify(state.status)} with ${JSON.stringify(state.stats)}, ` +
          `expected sent to ${n}`,
      );
    }
    const { rows } = await pool.query<{ seconds: number | null; messages: string }>(
      `SELECT extract(epoch FROM b.completed_at - b.started_at)::float8 AS seconds,
              (SELECT count(*) FROM messages m WHERE m.account_id = b.account_id AND m.broadcast_id = b.id) AS messages
       FROM broadcasts b WHERE b.account_id = $1 AND b.id = $2`,
      [account.accountId, broadcastId],
    );
    const serverS = rows[0]?.seconds ?? NaN;
    const messages = Number(rows[0]?.messages ?? NaN);
    if (messages !== n) throw new Error(`${messages} messages carry the broadcast, expected ${n}`);

    const elapsedS = (done - created) / 1000;
    const perS = n / elapsedS;
    const rssPeak = sampler.peakSince(created);
    const growthMiB = (rssPeak - rssBaseline) / MIB;
    const readP99 = duringReads?.p99Ms ?? NaN;
    ctx.log(
      `sent: ${fmtInt(sent)} recipients, ${failed} failed, ${fmtInt(messages)} messages; ` +
        `started_at to completed_at in the database: ${fmt(serverS, 2)} s (${fmtInt(n / serverS)}/s)`,
    );
    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    ctx.log('');
    ctx.log(
      formatTable(
        ['figure', 'measured', 'target (issue)', 'met'],
        [
          [`create to status sent, s (polled every ${POLL_MS} ms)`, fmt(elapsedS, 2), '', ''],
          [
            `recipients/s (${fmtInt(n)} recipients)`,
            fmtInt(perS),
            `>= ${fmtInt(TARGET_RECIPIENTS_PER_S)}`,
            met(perS >= TARGET_RECIPIENTS_PER_S),
          ],
          [`service RSS before, MiB`, fmt(rssBaseline / MIB, 1), '', ''],
          [`service RSS peak, MiB`, fmt(rssPeak / MIB, 1), '', ''],
          [
            `service RSS growth, MiB`,
            fmt(growthMiB, 1),
            `< ${TARGET_RSS_GROWTH_MIB}`,
            met(growthMiB < TARGET_RSS_GROWTH_MIB),
          ],
          [`GET /v1/contacts/{id} req/s during`, fmtInt(duringReads?.reqPerSec ?? NaN), '', ''],
          [`GET /v1/contacts/{id} p50 during, ms`, fmt(duringReads?.p50Ms ?? NaN, 2), '', ''],
          [
            `GET /v1/contacts/{id} p99 during, ms`,
            fmt(readP99, 2),
            `< ${TARGET_READ_P99_MS}`,
            met(readP99 < TARGET_READ_P99_MS),
          ],
        ],
      ),
    );
    ctx.log(
      `(RSS: VmRSS of the service process every ${RSS_INTERVAL_MS} ms; before = median of the ` +
        `${BASELINE_MS / 1000} s before the create, reads already running; reads: ${readsLabel}, ` +
        `latencies from the create to the poll that saw "sent"; with no broadcast: ` +
        `p50 ${fmt(idle.p50Ms, 2)} ms, p99 ${fmt(idle.p99Ms, 2)} ms)`,
    );
  },
};
