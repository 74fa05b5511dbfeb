import { AUDIENCE_TAG, BIG_COUNT, BIG_NAME, MEDIUM_NAME } from '../contacts/data.js';
import { delay } from '../lib/child.js';
import { CpuMeter, type CpuShares } from '../lib/cpu.js';
import { openPool } from '../lib/db.js';
import { PgWaits, walCounters, walLine } from '../lib/pg-waits.js';
import { expectJson, requestJson, stringField } from '../lib/http.js';
import { fmt, fmtInt, formatTable, percentile } from '../lib/report.js';
import { RssSampler } from '../lib/rss.js';
import { hasSeededDatabase, seededAccount } from '../lib/seeded-account.js';
import type { BenchAccount } from '../lib/service.js';
import type { BenchContext, Suite } from '../lib/suite.js';
import {
  BENCH_TEMPLATE,
  approvedTemplate,
  broadcastStats,
  connectWhatsApp,
  createTemplateBroadcast,
  requireGraph,
  type BroadcastBody,
} from '../lib/whatsapp.js';

const TARGET_PER_S = 10_000;
const TARGET_RSS_MIB = 300;
const TARGET_SEND_P99_RATIO = 2;
const MIB = 1024 * 1024;
const POLL_MS = 1_000;
const PROGRESS_EVERY_MS = 10_000;
const RSS_INTERVAL_MS = 250;
/** The other account's template sends, before the broadcast and while it runs. */
const SENDS_PER_S = 20;

interface Sample {
  at: number;
  ms: number;
  status: number;
}

/**
 * The other account's sends at a steady pace, each one timed: the yardstick of "other accounts
 * unchanged while a broadcast runs". Open loop: a slow answer does not delay the next send.
 */
class PacedSends {
  readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<Promise<void>>();
  private n = 0;

  constructor(
    private readonly url: string,
    private readonly account: BenchAccount,
    private readonly contacts: string[],
  ) {}

  start(): void {
    this.timer = setInterval(() => this.sendOne(), 1000 / SENDS_PER_S);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all(this.pending);
  }

  between(from: number, to: number): Sample[] {
    return this.samples.filter((s) => s.at >= from && s.at < to);
  }

  private sendOne(): void {
    const n = this.n++;
    const at = performance.now();
    const done = requestJson(`${this.url}/v1/messages/send`, {
      method: 'POST',
      token: this.account.apiKey,
      body: {
        contact_id: this.contacts[n % this.contacts.length],
        channel: 'whatsapp',
        type: 'template',
        template_name: BENCH_TEMPLATE.name,
        template_params: [`Customer ${n}`, `#${200_000 + n}`],
      },
    }).then(
      (res) => void this.samples.push({ at, ms: performance.now() - at, status: res.status }),
      () => void this.samples.push({ at, ms: performance.now() - at, status: 0 }),
    );
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }
}

/**
 * The account's template approved and its whatsapp channel on the fake Graph API. A run before
 * this one may have left either: the channel is disconnected first (templates are Meta's while
 * it is connected), an approved template kept.
 */
async function readyToSend(ctx: BenchContext, account: BenchAccount): Promise<void> {
  const { service } = ctx;
  await requestJson(`${service.url}/v1/channels/whatsapp`, {
    method: 'DELETE',
    token: account.apiKey,
  });
  const templates = await expectJson(200, `${service.url}/v1/templates?limit=100`, {
    token: account.apiKey,
  });
  const mine = (templates.data as { name: string; status: string }[]).find(
    (t) => t.name === BENCH_TEMPLATE.name,
  );
  if (mine?.status !== 'approved') await approvedTemplate(service, account);
  await connectWhatsApp(service, requireGraph(ctx), account);
  ctx.defer(async () => {
    await requestJson(`${service.url}/v1/channels/whatsapp`, {
      method: 'DELETE',
      token: account.apiKey,
    });
  });
}

function latencyRow(what: string, samples: Sample[]): string[] {
  const ms = samples.filter((s) => s.status === 201).map((s) => s.ms);
  const other = samples.length - ms.length;
  return [
    what,
    fmtInt(samples.length),
    String(other),
    fmt(percentile(ms, 50), 1),
    fmt(percentile(ms, 99), 1),
  ];
}

function cpuLine(c: CpuShares): string {
  return Object.entries(c)
    .map(([group, cores]) => `${group} ${fmt(cores * 100, 0)} %`)
    .join(', ');
}

/**
 * A template broadcast to the 1,000,000 contacts of the seeded account (a tag every one of them
 * holds) through the fake Graph API, while another account of the seed sends templates at a
 * steady pace: recipients a second, the service's RSS throughout, the stats at the end against
 * the messages stored and the sends Graph counted, and the other account's send latency before
 * and during the broadcast.
 */
export const broadcastMillionSuite: Suite = {
  name: 'broadcast-million',
  description:
    'a WhatsApp template broadcast to 1,000,000 contacts (fake Graph API) on the contacts seed, ' +
    "another account's sends timed before and during it, the service's RSS and CPU " +
    '(needs BENCH_DATABASE_URL of bench/contacts/seed.ts)',
  serviceEnv: { ALLOW_PRIVATE_TARGETS: 'true', SANDBOX_AUTO_ADVANCE: 'false' },
  fakeGraph: true,
  apiOnly: (settings) => settings.broadcastWorkers > 0 && settings.databaseUrl !== null,
  async run(ctx) {
    const { service, settings } = ctx;
    if (!hasSeededDatabase(ctx, 'contacts', 'broadcast-million')) return;
    const graph = requireGraph(ctx);
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());
    const big = await seededAccount(ctx, pool, BIG_NAME, 'bench broadcast-million suite');
    const other = await seededAccount(ctx, pool, MEDIUM_NAME, 'bench broadcast-million suite');
    // The whole million by default; another tag (BENCH_BROADCAST_TAG) for a shorter run.
    const tag = settings.broadcastTag;
    const audience = await pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM contacts WHERE account_id = $1 AND tags @> ARRAY[$2]::text[]',
      [big.accountId, tag],
    );
    const n = Number(audience.rows[0]?.n ?? 0);
    if (tag === AUDIENCE_TAG ? n !== BIG_COUNT : n === 0) {
      throw new Error(
        `${fmtInt(n)} contacts hold "${tag}", expected ${tag === AUDIENCE_TAG ? fmtInt(BIG_COUNT) : 'some'}: ` +
          'seed again (npx tsx bench/contacts/seed.ts --replace)',
      );
    }
    await readyToSend(ctx, big);
    await readyToSend(ctx, other);
    const contacts = (
      await pool.query<{ id: string }>(
        'SELECT id FROM contacts WHERE account_id = $1 ORDER BY id LIMIT 1000',
        [other.accountId],
      )
    ).rows.map((r) => r.id);
    ctx.log(
      `audience: the ${fmtInt(n)} contacts tagged "${tag}" of ${big.accountId}; the ` +
        `other account ${other.accountId} sends a template to one of ${fmtInt(contacts.length)} ` +
        `contacts ${SENDS_PER_S} times a second; both connected to the fake Graph API`,
    );

    // The service's processes: one running everything, or the API and its workers apart.
    const processes: Record<string, number> = {};
    if (settings.broadcastWorkers === 0) processes.service = service.pid;
    else {
      processes['API (serve --no-workers)'] = service.pid;
      for (let i = 1; i <= settings.broadcastWorkers; i++) {
        const worker = await service.startWorker();
        ctx.defer(() => worker.stop());
        processes[`worker ${i}`] = worker.pid;
      }
    }
    const samplers = Object.entries(processes).map(([name, pid]) => {
      const sampler = new RssSampler(pid, RSS_INTERVAL_MS);
      sampler.start();
      ctx.defer(() => sampler.stop());
      return { name, sampler };
    });
    const rssPeak = (from: number) => Math.max(...samplers.map((s) => s.sampler.peakSince(from)));
    const cpu = new CpuMeter({ ...processes, 'fake Graph': graph.pid, PostgreSQL: 'postgres' });
    const sends = new PacedSends(service.url, other, contacts);
    sends.start();
    ctx.defer(() => sends.stop());
    // What the database's sessions wait on (BENCH_PG_WAITS), on a connection of its own.
    const waitsPool = settings.pgWaits ? openPool(await service.databaseUrl()) : null;
    if (waitsPool) ctx.defer(() => waitsPool.end());
    const waits = waitsPool ? new PgWaits(waitsPool) : null;
    await delay(2_000); // the first sends open their connections
    const baselineFrom = performance.now();
    await cpu.start();
    waits?.start();
    await delay(settings.broadcastBaselineS * 1000);
    const cpuIdle = await cpu.stop();
    const waitsIdle = waits?.stop();
    await graph.reset();

    const walFrom = waitsPool ? await walCounters(waitsPool) : null;
    const created = performance.now();
    await cpu.start();
    waits?.start();
    const broadcast = await createTemplateBroadcast(service.url, big.apiKey, {
      name: 'Bench broadcast to a million',
      tag,
      code: '#SPRING-SALE',
    });
    const broadcastId = stringField(broadcast, 'id');
    ctx.log(`broadcast ${broadcastId} created ${JSON.stringify(broadcast.status)}`);

    const deadline = Date.now() + Math.max(settings.waitTimeoutS, 1_800) * 1000;
    let lastLogAt = performance.now();
    let lastDone = 0;
    let state: BroadcastBody = broadcast;
    for (;;) {
      await delay(POLL_MS);
      state = await expectJson(200, `${service.url}/v1/broadcasts/${broadcastId}`, {
        token: big.apiKey,
      });
      if (state.status !== 'sending' && state.status !== 'scheduled') break;
      const now = performance.now();
      if (now - lastLogAt >= PROGRESS_EVERY_MS) {
        const { sent, failed } = broadcastStats(state);
        const rate = ((sent + failed - lastDone) * 1000) / (now - lastLogAt);
        ctx.log(
          `  ${fmtInt(sent + failed)}/${fmtInt(n)} after ${fmt((now - created) / 1000, 0)} s: ` +
            `${fmtInt(rate)}/s lately; RSS peak ${fmt(rssPeak(lastLogAt) / MIB, 0)} MiB; ` +
            `other account's sends p99 ${fmt(
              percentile(
                sends.between(lastLogAt, now).map((s) => s.ms),
                99,
              ),
              1,
            )} ms`,
        );
        lastLogAt = now;
        lastDone = sent + failed;
      }
      if (Date.now() > deadline) {
        throw new Error(`broadcast ${broadcastId} still sending: ${JSON.stringify(state.stats)}`);
      }
    }
    const done = performance.now();
    const cpuBusy = await cpu.stop();
    const waitsBusy = waits?.stop();
    const walTo = waitsPool ? await walCounters(waitsPool) : null;
    await sends.stop();
    for (const s of samplers) await s.sampler.stop();

    const { sent, failed } = broadcastStats(state);
    const stored = await pool.query<{ seconds: number | null; messages: string; with_ids: string }>(
      `SELECT extract(epoch FROM b.completed_at - b.started_at)::float8 AS seconds,
              (SELECT count(*) FROM messages m WHERE m.account_id = b.account_id AND m.broadcast_id = b.id) AS messages,
              (SELECT count(*) FROM messages m WHERE m.account_id = b.account_id AND m.broadcast_id = b.id
                 AND m.provider_message_id IS NOT NULL) AS with_ids
       FROM broadcasts b WHERE b.account_id = $1 AND b.id = $2`,
      [big.accountId, broadcastId],
    );
    const messages = Number(stored.rows[0]?.messages ?? NaN);
    const withIds = Number(stored.rows[0]?.with_ids ?? NaN);
    const otherSent = sends.between(created, done).filter((s) => s.status === 201).length;
    const graphStats = await graph.stats();
    const exact =
      state.status === 'sent' && sent === n && failed === 0 && messages === n && withIds === n;
    ctx.log(
      `ended ${JSON.stringify(state.status)}: stats ${JSON.stringify(state.stats)}; ` +
        `${fmtInt(messages)} messages carry the broadcast, ${fmtInt(withIds)} with a wamid; the fake ` +
        `Graph API answered ${fmtInt(graphStats.sent)} sends (the broadcast's ${fmtInt(n)} and ` +
        `${fmtInt(otherSent)} of the other account) and refused ${graphStats.refused + graphStats.invalid + graphStats.other}; ` +
        `started_at to completed_at ${fmt(stored.rows[0]?.seconds ?? NaN, 1)} s`,
    );

    const elapsedS = (done - created) / 1000;
    const perS = n / elapsedS;
    const rssPeaks = samplers.map(
      (s) => `${s.name} ${fmt(s.sampler.peakSince(baselineFrom) / MIB, 0)}`,
    );
    const rssMax = rssPeak(baselineFrom) / MIB;
    const before = sends.between(baselineFrom, created);
    const during = sends.between(created, done);
    const p99 = (s: Sample[]) =>
      percentile(
        s.filter((x) => x.status === 201).map((x) => x.ms),
        99,
      );
    const ratio = p99(during) / p99(before);
    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    ctx.log('');
    ctx.log(
      formatTable(
        ["other account's sends", 'sends', 'not 201', 'p50 ms', 'p99 ms'],
        [
          latencyRow(`before (${settings.broadcastBaselineS} s)`, before),
          latencyRow(`during the broadcast (${fmt(elapsedS, 0)} s)`, during),
        ],
      ),
    );
    ctx.log('');
    ctx.log(
      formatTable(
        ['figure', 'measured', 'target (issue 26)', 'met'],
        [
          [
            `recipients/s (create to status sent, polled every ${POLL_MS / 1000} s)`,
            fmtInt(perS),
            `>= ${fmtInt(TARGET_PER_S)}`,
            met(perS >= TARGET_PER_S),
          ],
          [
            `RSS peak, MiB (${rssPeaks.join(', ')})`,
            fmt(rssMax, 0),
            `< ${TARGET_RSS_MIB}`,
            met(rssMax < TARGET_RSS_MIB),
          ],
          ['stats exact at the end', exact ? 'yes' : 'no', 'yes', met(exact)],
          [
            "other account's send p99, during / before",
            `${fmt(ratio, 2)}×`,
            `<= ${TARGET_SEND_P99_RATIO}×`,
            met(ratio <= TARGET_SEND_P99_RATIO),
          ],
        ],
      ),
    );
    ctx.log(
      `CPU, cores busy on average: before the broadcast ${cpuLine(cpuIdle)}; during it ` +
        `${cpuLine(cpuBusy)} (this machine has the cores machineInfo names; PostgreSQL is every ` +
        "process named postgres on it; the harness's own share is the rest)",
    );
    if (waitsIdle && waitsBusy) {
      ctx.log('');
      ctx.log(`The database before the broadcast: ${PgWaits.format(waitsIdle).join('\n')}`);
      ctx.log(`The database during it: ${PgWaits.format(waitsBusy).join('\n')}`);
      ctx.log(walLine(walFrom, walTo, n));
    }
    if (!exact) throw new Error('the broadcast did not end with exact stats');
  },
};
