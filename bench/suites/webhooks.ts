import { fileURLToPath } from 'node:url';
import { monotonicFactory } from 'ulid';
import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { expectJson, stringField } from '../lib/http.js';
import { pacedLoad } from '../lib/paced.js';
import { startWebhookReceiver, type WebhookReceiver } from '../lib/receiver.js';
import { fmt, fmtInt, formatTable, percentile } from '../lib/report.js';
import { benchPhone } from '../lib/seed.js';
import type { BenchContext, Suite } from '../lib/suite.js';
import type { ReceiverStats } from '../lib/webhook-receiver.js';

const CA_PEM = fileURLToPath(new URL('../../test/fixtures/tls/ca.pem', import.meta.url));
const EVENT = 'contact.created';
const POLL_MS = 250;
const PROGRESS_EVERY_MS = 5_000;
/** No new arrival for this long while waiting: the deliveries are stuck, stop. */
const STALL_MS = 60_000;
const FIRST_DELIVERY_TIMEOUT_MS = 30_000;
const BOOKKEEPING_TIMEOUT_MS = 60_000;
const PACED_MAX_IN_FLIGHT = 256;
const PACED_TIMEOUT_MS = 10_000;
const KEPT_UP_LAG_MS = 100;
const TARGET_THROUGHPUT = 2_000;
const TARGET_P99_MS = 1_000;

/** Polls the receiver until it has recorded `expected` distinct events; bounded and stall-checked. */
async function waitForEvents(
  ctx: BenchContext,
  receiver: WebhookReceiver,
  expected: number,
  label: string,
): Promise<ReceiverStats> {
  const started = Date.now();
  const deadline = started + ctx.settings.waitTimeoutS * 1000;
  let lastProgressAt = started;
  let lastCount = -1;
  let lastLogAt = started;
  for (;;) {
    const stats = await receiver.stats();
    const now = Date.now();
    if (stats.events >= expected) return stats;
    if (stats.events !== lastCount) {
      lastCount = stats.events;
      lastProgressAt = now;
    }
    if (now - lastLogAt >= PROGRESS_EVERY_MS) {
      lastLogAt = now;
      ctx.log(`  ${label}: ${fmtInt(stats.events)}/${fmtInt(expected)} delivered`);
    }
    if (now - lastProgressAt > STALL_MS) {
      throw new Error(
        `${label}: no delivery for ${STALL_MS / 1000} s, ${stats.events}/${expected} received ` +
          `(${JSON.stringify(stats)})`,
      );
    }
    if (now > deadline) {
      throw new Error(
        `${label}: ${stats.events}/${expected} received after ${ctx.settings.waitTimeoutS} s (BENCH_WAIT_TIMEOUT)`,
      );
    }
    await delay(POLL_MS);
  }
}

function checkClean(label: string, stats: ReceiverStats): void {
  if (stats.badSignatures > 0 || stats.malformed > 0) {
    throw new Error(
      `${label}: ${stats.badSignatures} bad signatures, ${stats.malformed} malformed requests`,
    );
  }
}

export const webhooksSuite: Suite = {
  name: 'webhooks',
  description: `${EVENT} deliveries to a local HTTPS receiver: backlog throughput, latency at a steady rate`,
  serviceEnv: { ALLOW_PRIVATE_TARGETS: 'true', NODE_EXTRA_CA_CERTS: CA_PEM },
  async run(ctx) {
    const { service, settings } = ctx;
    const account = await service.createAccount('bench webhooks');
    const receiver = await startWebhookReceiver(ctx.projectRoot);
    ctx.defer(() => receiver.stop());
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    const webhook = await expectJson(201, `${service.url}/v1/webhooks`, {
      method: 'POST',
      token: account.apiKey,
      body: { url: receiver.url, events: [EVENT] },
    });
    const webhookId = stringField(webhook, 'id');
    await receiver.setSecret(stringField(webhook, 'secret'));
    ctx.log(
      `receiver: node:https in a child process on ${receiver.url} (test CA certificate), ` +
        `answers 204 at once; webhook ${webhookId} subscribed to ${EVENT}`,
    );

    // One real event end to end first: the path works and signatures check.
    let phoneN = 0;
    const contact = await expectJson(201, `${service.url}/v1/contacts`, {
      method: 'POST',
      token: account.apiKey,
      body: { phone: benchPhone(212, phoneN++), name: 'Bench Webhook Contact' },
    });
    const deadline = Date.now() + FIRST_DELIVERY_TIMEOUT_MS;
    let firstStats = await receiver.stats();
    while (firstStats.events < 1 && Date.now() < deadline) {
      await delay(POLL_MS);
      firstStats = await receiver.stats();
    }
    if (firstStats.events < 1) {
      throw new Error(
        `no delivery reached the receiver within ${FIRST_DELIVERY_TIMEOUT_MS / 1000} s`,
      );
    }
    checkClean('first delivery', firstStats);
    ctx.log('first delivery received, X-Service-Signature verified (every delivery is checked)');

    // (a) Throughput: a backlog of N events, queued at once.
    const n = settings.webhookEvents;
    await receiver.reset();
    const ulid = monotonicFactory();
    const eventIds: string[] = [];
    const payloads: string[] = [];
    for (let i = 0; i < n; i++) {
      eventIds.push(`evt_${ulid()}`);
      payloads.push(JSON.stringify({ ...contact, id: `con_${ulid()}` }));
    }
    ctx.log(
      `(a) throughput: ${fmtInt(n)} ${EVENT} events and their deliveries inserted into events and ` +
        'webhook_deliveries in one SQL statement (the rows the outbox writes), while the ' +
        "service's dispatcher runs: this measures the dispatcher, not the API",
    );
    const insertStart = performance.now();
    await pool.query(
      `WITH ev AS (
         INSERT INTO events (account_id, id, type, data, created_at)
         SELECT $1, e.id, $3, e.data::json, now()
         FROM unnest($4::text[], $5::text[]) AS e(id, data)
         RETURNING id, created_at)
       INSERT INTO webhook_deliveries
         (account_id, webhook_id, event_id, event_type, state, next_attempt_at, created_at, updated_at)
       SELECT $1, $2, ev.id, $3, 'pending', ev.created_at, ev.created_at, ev.created_at FROM ev`,
      [account.accountId, webhookId, EVENT, eventIds, payloads],
    );
    const committedAt = performance.timeOrigin + performance.now();
    ctx.log(
      `  inserted in ${((performance.now() - insertStart) / 1000).toFixed(2)} s; waiting for the deliveries`,
    );
    const burst = await waitForEvents(ctx, receiver, n, '(a)');
    checkClean('(a)', burst);

    // The dispatcher records each outcome after the receiver's answer: wait for its books.
    let books: { delivered: number; pending: number; failed: number; retried: number } = {
      delivered: 0,
      pending: n,
      failed: 0,
      retried: 0,
    };
    const booksDeadline = Date.now() + BOOKKEEPING_TIMEOUT_MS;
    while (Date.now() < booksDeadline) {
      const { rows } = await pool.query<{
        delivered: string;
        pending: string;
        failed: string;
        retried: string;
      }>(
        `SELECT count(*) FILTER (WHERE state = 'delivered') AS delivered,
                count(*) FILTER (WHERE state = 'pending') AS pending,
                count(*) FILTER (WHERE state = 'failed') AS failed,
                count(*) FILTER (WHERE attempts > 1) AS retried
         FROM webhook_deliveries WHERE account_id = $1 AND webhook_id = $2 AND event_id = ANY($3::text[])`,
        [account.accountId, webhookId, eventIds],
      );
      const row = rows[0];
      books = {
        delivered: Number(row?.delivered ?? 0),
        pending: Number(row?.pending ?? 0),
        failed: Number(row?.failed ?? 0),
        retried: Number(row?.retried ?? 0),
      };
      if (books.pending === 0) break;
      await delay(POLL_MS);
    }
    const spanS = (burst.lastArrival - burst.firstArrival) / 1000;
    const throughput = n > 1 && spanS > 0 ? (n - 1) / spanS : NaN;
    const drainS = (burst.lastArrival - committedAt) / 1000;
    ctx.log(
      `  ${fmtInt(n)} delivered: first arrival ${fmt((burst.firstArrival - committedAt) / 1000, 2)} s ` +
        `after the commit, last ${fmt(drainS, 2)} s after; ${fmtInt(throughput)}/s first to last arrival, ` +
        `${fmtInt(n / drainS)}/s commit to last`,
    );
    ctx.log(
      `  receiver: ${fmtInt(burst.requests)} requests, ${burst.duplicates} duplicates; service's books: ` +
        `${fmtInt(books.delivered)} delivered, ${books.pending} pending, ${books.failed} failed, ` +
        `${books.retried} needed more than one attempt`,
    );

    // (b) Latency at a steady rate of real events.
    const rate = settings.webhookRate;
    const count = rate * settings.webhookSeconds;
    await receiver.reset();
    ctx.log(
      `(b) latency: ${fmtInt(count)} contacts created through POST /v1/contacts at a steady ` +
        `${rate}/s for ${settings.webhookSeconds} s (open loop: request i sent at i/${rate} s, ` +
        `up to ${PACED_MAX_IN_FLIGHT} in flight); latency = receiver arrival - the event's ` +
        '"timestamp" (the service clock when it recorded the event)',
    );
    const firstPhone = phoneN;
    const created = await pacedLoad({
      baseUrl: service.url,
      rate,
      count,
      maxInFlight: PACED_MAX_IN_FLIGHT,
      timeoutMs: PACED_TIMEOUT_MS,
      expectedStatus: 201,
      request: (i) => ({
        method: 'POST',
        path: '/v1/contacts',
        headers: { authorization: `Bearer ${account.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ phone: benchPhone(212, firstPhone + i), name: `Bench Paced ${i}` }),
      }),
    });
    phoneN += count;
    if (created.ok !== count || created.errors > 0) {
      throw new Error(
        `(b): ${created.ok}/${count} contacts created, ${created.errors} errors, ` +
          `statuses ${JSON.stringify(created.statusCounts)}`,
      );
    }
    ctx.log(
      `  sent at ${fmt(created.sendRate, 1)}/s (most behind schedule: ${fmt(created.maxLagMs, 1)} ms); ` +
        `POST /v1/contacts p50 ${fmt(created.p50Ms, 2)} ms, p99 ${fmt(created.p99Ms, 2)} ms`,
    );
    // Behind schedule: the service took fewer than `rate` creates a second, so the events came
    // slower than the rate the figure is named for.
    const keptUp = created.maxLagMs <= KEPT_UP_LAG_MS;
    if (!keptUp) {
      ctx.log(
        `  WARNING: sends fell up to ${fmt(created.maxLagMs / 1000, 1)} s behind the schedule (the ` +
          `service answered fewer than ${rate} creates/s with ${PACED_MAX_IN_FLIGHT} in flight): ` +
          'the latency below is not at the nominal rate',
      );
    }
    const steady = await waitForEvents(ctx, receiver, count, '(b)');
    checkClean('(b)', steady);
    const dump = await receiver.dump();
    const latencies = dump.arrivals.map((arrival, i) => arrival - (dump.timestamps[i] ?? NaN));
    const [p50, p90, p99] = [50, 90, 99].map((p) => percentile(latencies, p));
    const max = latencies.reduce((m, v) => Math.max(m, v), -Infinity);
    ctx.log(
      `  ${fmtInt(steady.events)} delivered, ${steady.duplicates} duplicates; latency p50 ${fmt(p50 ?? NaN, 1)} ms, ` +
        `p90 ${fmt(p90 ?? NaN, 1)} ms, p99 ${fmt(p99 ?? NaN, 1)} ms, max ${fmt(max, 1)} ms`,
    );

    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    ctx.log('');
    ctx.log(
      formatTable(
        ['figure', 'measured', 'target (issue)', 'met'],
        [
          [
            `(a) deliveries/s, first to last arrival (${fmtInt(n)} events)`,
            fmtInt(throughput),
            `>= ${fmtInt(TARGET_THROUGHPUT)}`,
            met(throughput >= TARGET_THROUGHPUT),
          ],
          [`(a) total: commit to last arrival, s`, fmt(drainS, 2), '', ''],
          [`(b) latency p50 at ${rate} events/s, ms`, fmt(p50 ?? NaN, 1), '', ''],
          [
            `(b) latency p99 at ${rate} events/s, ms`,
            fmt(p99 ?? NaN, 1),
            `< ${fmtInt(TARGET_P99_MS)}`,
            met((p99 ?? Infinity) < TARGET_P99_MS),
          ],
        ],
      ),
    );
    ctx.log(
      `(one webhook, one receiver on this machine; (b) ran at ${fmt(created.sendRate, 1)} ` +
        `contacts/s achieved, ${keptUp ? 'on schedule' : 'BEHIND schedule'})`,
    );
  },
};
