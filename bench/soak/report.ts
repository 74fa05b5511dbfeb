/**
 * The soak's end: waits for the broadcast, the jobs, the webhook deliveries and the streams to
 * finish, then checks what the issue asks (every accepted send at Graph once, none twice even
 * across a kill -9: what a killed process had handed to Graph is failed in doubt, and counted;
 * every event at the receiver and on every stream, no broadcast stranded, 5xx only around the
 * faults, memory flat), prints the figures and the timeline, and writes them as JSON under /tmp.
 */
import { writeFile } from 'node:fs/promises';
import type pg from 'pg';
import { delay } from '../lib/child.js';
import { IN_DOUBT_REASON } from '../../src/messages/send-recorder.js';
import type { FakeGraph } from '../lib/graph.js';
import { expectJson } from '../lib/http.js';
import type { WebhookReceiver } from '../lib/receiver.js';
import { fmtInt, formatTable, machineInfo, median, percentile } from '../lib/report.js';
import type { BenchAccount } from '../lib/service.js';
import type { MixedLoad } from './load.js';
import type { EventStreamClient } from './streams.js';

const DRAIN_TIMEOUT_MS = 15 * 60_000;
/** A 5xx or a cut connection is one of the faults' if it came this soon after one ended. */
const FAULT_GRACE_S = 30;
/** A process's memory is flat if its last samples are within this of those at its middle. */
const FLAT_MIB = 64;

export interface Soak {
  origin: number;
  minutes: number;
  recipients: number;
  broadcastRate: string;
  base: string;
  pool: pg.Pool;
  graph: FakeGraph;
  receiver: WebhookReceiver;
  streams: EventStreamClient[];
  load: MixedLoad;
  loadAccount: BenchAccount;
  castAccount: BenchAccount;
  broadcastId: string;
  eventsBefore: Set<string>;
  timeline: { atS: number; what: string }[];
  /** Each fault, in seconds since the start. */
  faults: { what: string; fromS: number; toS: number }[];
  /** RSS samples of each service process (a restarted one under a name of its own). */
  rss: Record<string, { atS: number; mib: number }[]>;
  log: (what: string) => void;
}

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

async function count(pool: pg.Pool, sql: string, params: unknown[]): Promise<number> {
  return Number((await pool.query<{ n: string }>(sql, params)).rows[0]?.n ?? NaN);
}

async function eventIds(s: Soak, accountIds: string[]): Promise<string[]> {
  const { rows } = await s.pool.query<{ id: string }>(
    'SELECT id FROM events WHERE account_id = ANY($1)',
    [accountIds],
  );
  return rows.map((r) => r.id).filter((id) => !s.eventsBefore.has(id));
}

/** Polls until the broadcast, the jobs, the deliveries and the streams have nothing left. */
async function drain(s: Soak): Promise<{ broadcast: Record<string, unknown>; seconds: number }> {
  const started = Date.now();
  const accounts = [s.loadAccount.accountId, s.castAccount.accountId];
  let lastLog = 0;
  for (;;) {
    const unknown: Record<string, unknown> = { status: 'unknown' };
    const broadcast = await expectJson(200, `${s.base}/v1/broadcasts/${s.broadcastId}`, {
      token: s.castAccount.apiKey,
    }).catch(() => unknown);
    const jobs = await count(
      s.pool,
      'SELECT count(*) AS n FROM jobs WHERE account_id = ANY($1) AND dead_at IS NULL',
      [accounts],
    );
    const pending = await count(
      s.pool,
      `SELECT count(*) AS n FROM webhook_deliveries WHERE account_id = ANY($1) AND state = 'pending'`,
      [accounts],
    );
    const streamIds = await eventIds(s, [s.loadAccount.accountId]);
    const behind = s.streams.filter((st) => streamIds.some((id) => !st.ids.has(id))).length;
    const done = broadcast.status !== 'sending' && jobs === 0 && pending === 0 && behind === 0;
    if (done) return { broadcast, seconds: (Date.now() - started) / 1000 };
    if (Date.now() - started > DRAIN_TIMEOUT_MS) {
      s.log(
        `gave up waiting: broadcast ${String(broadcast.status)}, ${jobs} jobs, ${pending} deliveries, ${behind} streams behind`,
      );
      return { broadcast, seconds: (Date.now() - started) / 1000 };
    }
    if (Date.now() - lastLog > 15_000) {
      lastLog = Date.now();
      const stats = broadcast.stats as { sent?: number } | undefined;
      s.log(
        `draining: broadcast ${String(broadcast.status)} (${fmtInt(stats?.sent ?? NaN)} sent), ${jobs} jobs, ${pending} deliveries pending, ${behind} streams behind`,
      );
    }
    await delay(2_000);
  }
}

/** Times (s since the start) of the sends Graph answered, per send number and per broadcast phone. */
function graphSends(sends: Record<string, number[]>, origin: number) {
  const bySend = new Map<number, number[]>();
  const byPhone = new Map<string, number[]>();
  for (const [key, times] of Object.entries(sends)) {
    const seconds = times.map((t) => (t - origin) / 1000);
    const send = /"soak-send-(\d+)"/.exec(key);
    if (send) bySend.set(Number(send[1]), [...(bySend.get(Number(send[1])) ?? []), ...seconds]);
    else if (key.includes('"soak-broadcast"')) byPhone.set(key.split(' ')[0]!, seconds);
  }
  return { bySend, byPhone };
}

/**
 * Repeats (beyond the first), and those of them across a kill -9 (between the first send and
 * the repeat): none is allowed, a killed worker's batch included (at most once towards Graph).
 */
function repeats(times: Iterable<number[]>, kills: { fromS: number }[]) {
  let all = 0;
  let acrossKill = 0;
  for (const t of times) {
    const sorted = [...t].sort((a, b) => a - b);
    for (const again of sorted.slice(1)) {
      all++;
      if (kills.some((k) => k.fromS >= sorted[0]! - 1 && k.fromS <= again)) acrossKill++;
    }
  }
  return { all, acrossKill };
}

/**
 * The messages failed in doubt (a worker or API process killed while Graph had them: not sent
 * again), of the broadcast, and of the API sends by their number (`soak-send-N`).
 */
async function inDoubt(s: Soak): Promise<{ cast: number; sends: Set<number> }> {
  const { rows } = await s.pool.query<{ broadcast_id: string | null; params: unknown }>(
    `SELECT broadcast_id, template_params AS params FROM messages
     WHERE account_id = ANY($1) AND status = 'failed' AND failure_reason = $2`,
    [[s.loadAccount.accountId, s.castAccount.accountId], IN_DOUBT_REASON],
  );
  const sends = new Set<number>();
  for (const r of rows) {
    const n = /"soak-send-(\d+)"/.exec(JSON.stringify(r.params));
    if (r.broadcast_id === null && n) sends.add(Number(n[1]));
  }
  return { cast: rows.filter((r) => r.broadcast_id === s.broadcastId).length, sends };
}

export async function checkAndReport(s: Soak): Promise<number> {
  const { broadcast, seconds: drainS } = await drain(s);
  s.log(`drained in ${drainS.toFixed(1)} s`);
  const checks: Check[] = [];
  const check = (name: string, ok: boolean, detail: string) => checks.push({ name, ok, detail });
  const kills = s.faults.filter((f) => f.what.includes('kill'));

  // The broadcast, whole and at most once: a recipient whose batch was with Graph when its
  // worker was killed is failed in doubt, never sent again.
  const doubt = await inDoubt(s);
  const stats = broadcast.stats as { sent?: number; failed?: number } | undefined;
  const castMessages = await count(
    s.pool,
    `SELECT count(*) AS n FROM messages WHERE account_id = $1 AND broadcast_id = $2
       AND status = 'sent' AND provider_message_id IS NOT NULL`,
    [s.castAccount.accountId, s.broadcastId],
  );
  check(
    'broadcast finished, every recipient sent or failed in doubt',
    broadcast.status === 'sent' &&
      stats?.sent === castMessages &&
      stats.failed === doubt.cast &&
      castMessages + doubt.cast === s.recipients,
    `status ${String(broadcast.status)}, stats ${JSON.stringify(stats)}, ${fmtInt(castMessages)} messages sent with a provider id, ${fmtInt(doubt.cast)} failed in doubt`,
  );
  const { bySend, byPhone } = graphSends(await s.graph.sends(), s.origin);
  const castRepeats = repeats(byPhone.values(), kills);
  check(
    'Graph got every broadcast recipient sent, none twice',
    byPhone.size >= castMessages &&
      byPhone.size <= castMessages + doubt.cast &&
      castRepeats.all === 0,
    `${fmtInt(byPhone.size)} recipients at Graph (${fmtInt(byPhone.size - castMessages)} of the ${fmtInt(doubt.cast)} in doubt); ${castRepeats.all} repeats (${castRepeats.acrossKill} across a kill -9)`,
  );

  // API sends: every accepted one at Graph (or failed in doubt), none twice.
  const accepted = new Set(s.load.acceptedSends);
  const missing = [...accepted].filter((n) => !bySend.has(n) && !doubt.sends.has(n));
  const sendRepeats = repeats([...bySend.values()], kills);
  const unaccepted = [...bySend.keys()].filter((n) => !accepted.has(n)).length;
  check(
    'every accepted API send at Graph once (or failed in doubt)',
    missing.length === 0 && sendRepeats.all === 0,
    `${fmtInt(accepted.size)} accepted, ${missing.length} missing; ${doubt.sends.size} failed in doubt; ${sendRepeats.all} repeats (${sendRepeats.acrossKill} across a kill -9); ${unaccepted} at Graph that the client gave up on`,
  );

  // Creates and inbound messages: recorded once each.
  const created = await count(
    s.pool,
    `SELECT count(*) AS n FROM contacts WHERE account_id = $1 AND phone LIKE '+1646%'`,
    [s.loadAccount.accountId],
  );
  const createdAccepted = new Set(s.load.createdPhones).size;
  check(
    'every accepted create stored once',
    created === createdAccepted,
    `${fmtInt(createdAccepted)} accepted, ${fmtInt(created)} stored`,
  );
  const inbound = await s.pool.query<{ provider_message_id: string }>(
    `SELECT provider_message_id FROM messages WHERE account_id = $1 AND direction = 'inbound'`,
    [s.loadAccount.accountId],
  );
  const stored = new Set(inbound.rows.map((r) => r.provider_message_id));
  const lostInbound = s.load.acceptedInbound.filter((id) => !stored.has(id)).length;
  check(
    'every accepted inbound webhook stored once',
    lostInbound === 0 && stored.size === inbound.rows.length,
    `${fmtInt(s.load.acceptedInbound.length)} accepted, ${lostInbound} missing, ${inbound.rows.length - stored.size} stored twice`,
  );

  // Events: at the receiver and on every stream.
  const allEvents = await eventIds(s, [s.loadAccount.accountId, s.castAccount.accountId]);
  const received = new Set((await s.receiver.dump()).ids);
  const receiverStats = await s.receiver.stats();
  const notDelivered = allEvents.filter((id) => !received.has(id)).length;
  check(
    'every event delivered to the webhook receiver',
    notDelivered === 0,
    `${fmtInt(allEvents.length)} events, ${notDelivered} missing; ${fmtInt(receiverStats.requests)} requests, ${fmtInt(receiverStats.duplicates)} repeated`,
  );
  const loadEvents = await eventIds(s, [s.loadAccount.accountId]);
  const streamMissing = s.streams.map((st) => loadEvents.filter((id) => !st.ids.has(id)).length);
  check(
    `every event on each of the ${s.streams.length} streams`,
    streamMissing.every((m) => m === 0),
    `${fmtInt(loadEvents.length)} events each; missing ${streamMissing.reduce((a, b) => a + b, 0)} in all; ` +
      `${s.streams.reduce((a, st) => a + st.reconnects, 0)} reconnections, ${s.streams.reduce((a, st) => a + st.duplicates, 0)} repeats`,
  );

  const dead = await count(
    s.pool,
    'SELECT count(*) AS n FROM jobs WHERE account_id = ANY($1) AND dead_at IS NOT NULL',
    [[s.loadAccount.accountId, s.castAccount.accountId]],
  );
  check('no job dead', dead === 0, `${dead} dead jobs`);

  // 5xx and cut connections: only around the faults.
  const near = (atS: number) =>
    s.faults.some((f) => atS >= f.fromS - 1 && atS <= f.toS + FAULT_GRACE_S);
  const failures = s.load.failures.map((f) => ({ ...f, atS: f.atMs / 1000 }));
  const stray = failures.filter((f) => !near(f.atS));
  check(
    '5xx and cut connections only around the faults',
    stray.length === 0,
    `${failures.length} in all, ${stray.length} elsewhere${
      stray.length
        ? `: ${stray
            .slice(0, 5)
            .map((f) => `${f.atS.toFixed(1)} s ${f.kind} ${f.what}`)
            .join('; ')}`
        : ''
    }`,
  );
  const byBucket = new Map<string, number>();
  for (const f of failures) {
    // The latest fault begun by then whose window holds it.
    const fault = s.faults
      .filter((x) => f.atS >= x.fromS - 1 && f.atS <= x.toS + FAULT_GRACE_S)
      .sort((a, b) => b.fromS - a.fromS)[0];
    const key = `${Math.floor(f.atS / 10) * 10} s: ${f.what} (${fault?.what ?? 'no fault'})`;
    byBucket.set(key, (byBucket.get(key) ?? 0) + 1);
  }

  // Memory: each process's last samples against those at the middle of its life (the first
  // half is its warm-up: caches, pools, the broadcast's batches).
  const memory = Object.entries(s.rss).map(([name, samples]) => {
    const mib = samples.map((x) => x.mib);
    const n = mib.length;
    const middle = median(mib.slice(Math.floor(n * 0.4), Math.max(Math.ceil(n * 0.6), 1)));
    const late = median(mib.slice(-5));
    return {
      name,
      samples: n,
      startMiB: mib[0]!,
      maxMiB: Math.max(...mib),
      endMiB: mib.at(-1)!,
      growthMiB: late - middle,
    };
  });
  const growing = memory.filter((m) => m.samples >= 12 && m.growthMiB > FLAT_MIB);
  check(
    'memory flat',
    growing.length === 0,
    growing.length === 0
      ? `no process grew more than ${FLAT_MIB} MiB over the second half of its life`
      : growing.map((m) => `${m.name} +${m.growthMiB.toFixed(0)} MiB`).join(', '),
  );

  const latency = [...s.load.figures.entries()].map(([kind, f]) => ({
    kind,
    attempts: f.attempts,
    statuses: f.statuses,
    cut: f.cut,
    givenUp: f.givenUp,
    skipped: f.skipped,
    p50Ms: percentile(f.latenciesMs, 50),
    p99Ms: percentile(f.latenciesMs, 99),
  }));
  const report = {
    minutes: s.minutes,
    recipients: s.recipients,
    broadcastRate: s.broadcastRate,
    machine: machineInfo(),
    drainS,
    inDoubt: { broadcast: doubt.cast, apiSends: doubt.sends.size },
    checks,
    latency,
    failuresBy10s: Object.fromEntries(byBucket),
    memory,
    faults: s.faults,
    timeline: s.timeline,
  };
  const file = `/tmp/soak-report-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
  await writeFile(file, JSON.stringify(report, null, 2));

  const out = (line = '') => process.stdout.write(`${line}\n`);
  out();
  out(
    `Soak, ${s.minutes} minutes: 2 API processes, 2 workers, PgBouncer, Redis (${report.machine.nproc} cores, load ${report.machine.loadAvg})`,
  );
  out();
  out(
    `failed in doubt (handed to Graph by a killed process, not sent again): ${fmtInt(doubt.cast)} broadcast recipients, ${fmtInt(doubt.sends.size)} API sends`,
  );
  out();
  out(
    formatTable(
      ['check', 'ok', 'figures'],
      checks.map((c) => [c.name, c.ok ? 'yes' : 'NO', c.detail]),
    ),
  );
  out();
  out(
    formatTable(
      ['requests', 'attempts', 'statuses', 'cut', 'given up', 'p50 ms', 'p99 ms'],
      latency.map((l) => [
        l.kind,
        fmtInt(l.attempts),
        Object.entries(l.statuses)
          .map(([k, v]) => `${k}×${v}`)
          .join(' '),
        String(l.cut),
        String(l.givenUp),
        l.p50Ms.toFixed(1),
        l.p99Ms.toFixed(1),
      ]),
    ),
  );
  out();
  out('5xx and cut connections, by 10 s:');
  for (const [k, v] of byBucket) out(`  ${k} ×${v}`);
  out();
  out(
    formatTable(
      ['process', 'RSS start MiB', 'max', 'end', 'growth, 2nd half'],
      memory.map((m) => [
        m.name,
        m.startMiB.toFixed(0),
        m.maxMiB.toFixed(0),
        m.endMiB.toFixed(0),
        m.growthMiB.toFixed(1),
      ]),
    ),
  );
  out();
  out('Timeline:');
  for (const t of s.timeline) out(`  ${t.atS.toFixed(1).padStart(7)} s  ${t.what}`);
  out();
  out(`report written to ${file}`);
  return checks.every((c) => c.ok) ? 0 : 1;
}
