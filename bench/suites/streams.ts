import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { startBareStreamServer, type BareServer } from '../lib/bare.js';
import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { assertLocal, expectJson, stringField } from '../lib/http.js';
import { pacedLoad, type PacedRequest, type PacedResult } from '../lib/paced.js';
import { fmt, fmtInt, formatTable, median, percentile } from '../lib/report.js';
import { RssSampler } from '../lib/rss.js';
import { openSse, type SseStream } from '../lib/sse.js';
import type { BenchContext, Suite } from '../lib/suite.js';

const ORIGIN = 'http://localhost:8080';
/**
 * The visitor endpoints allow 600 requests a minute and 50 open streams per address
 * (src/webchat/webchat.routes.ts, visitor-stream.ts). The service sees the socket's
 * address (no trusted proxy), so the suite's visitors come from distinct loopback addresses,
 * 127.0.0.2 and up, this many per address: each address holds 50 streams and makes 3 requests
 * per visitor (session, first message, stream), 150 in all.
 */
const VISITORS_PER_ADDRESS = 50;
const SETUP_CONCURRENCY = 32;
const OPEN_CONCURRENCY = 64;
const OPEN_TIMEOUT_MS = 30_000;
const REQUEST_TIMEOUT_MS = 30_000;
const RSS_INTERVAL_MS = 250;
/** RSS "before" and "with the streams open": the median of the samples over this long. */
const RSS_WINDOW_MS = 2_000;
/** After the last stream opened, before RSS "with" is sampled. */
const SETTLE_MS = 3_000;
const PACED_MAX_IN_FLIGHT = 256;
const PACED_TIMEOUT_MS = 10_000;
const KEPT_UP_LAG_MS = 100;
/** After a round's last send, the replies still on their way get this long. */
const ARRIVAL_TIMEOUT_MS = 10_000;
const PROGRESS_EVERY_MS = 5_000;
const MIB = 1024 * 1024;
const TARGET_RSS_GROWTH_MIB = 300;
/** Point 5 of the issue: a reply reaches an open widget within a second. */
const TARGET_P99_MS = 1_000;

/** Source address of visitor `i`. */
function addressOf(i: number): string {
  return `127.0.0.${2 + Math.floor(i / VISITORS_PER_ADDRESS)}`;
}

/** Runs `fn(0…count-1)`, `concurrency` at a time; logs progress every few seconds. */
async function forEach(
  ctx: BenchContext,
  label: string,
  count: number,
  concurrency: number,
  fn: (i: number) => Promise<void>,
): Promise<number> {
  const start = performance.now();
  let next = 0;
  let done = 0;
  let lastLog = start;
  const worker = async () => {
    while (next < count) {
      await fn(next++);
      done++;
      if (performance.now() - lastLog >= PROGRESS_EVERY_MS) {
        lastLog = performance.now();
        ctx.log(`  ${label}: ${fmtInt(done)}/${fmtInt(count)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return (performance.now() - start) / 1000;
}

/** JSON over HTTP from a chosen loopback address (fetch cannot bind one). */
function postFrom(
  agent: http.Agent,
  localAddress: string,
  url: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<{ status: number; body: unknown }> {
  assertLocal(url);
  const target = new URL(url);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
        localAddress,
        agent,
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // kept as text for the error message
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`POST ${target.pathname}: timeout`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** The soft limit on open files of a process (Linux /proc), or NaN. */
async function openFilesLimit(pid: number | 'self'): Promise<number> {
  try {
    const limits = await readFile(`/proc/${pid}/limits`, 'utf8');
    const match = /^Max open files\s+(\d+|unlimited)/m.exec(limits);
    if (!match) return NaN;
    return match[1] === 'unlimited' ? Infinity : Number(match[1]);
  } catch {
    return NaN;
  }
}

/** One side measured: the service's widget streams or the bare server's. */
interface Side {
  label: string;
  pid: number;
  streams: SseStream[];
  sampler: RssSampler;
  rssBefore: number;
  rssWith: number;
  openS: number;
  /** Per round of replies. */
  rounds: Array<{ send: PacedResult; latencies: number[]; missing: number }>;
  /** The request that sends reply `k` (its content `r<k>`) to the stream of visitor `v`. */
  request: (v: number, k: number) => PacedRequest;
}

export const streamsSuite: Suite = {
  name: 'streams',
  description:
    'widget streams (GET /webchat/v1/{key}/stream) held open by one API process: RSS, and ' +
    'reply-to-widget latency (POST /v1/messages/send to the stream), against bare Fastify SSE',
  // Webchat signs visitor tokens under a key derived from SECRETS_KEY: a throwaway one.
  serviceEnv: { SECRETS_KEY: randomBytes(32).toString('base64') },
  async run(ctx) {
    const { service, settings } = ctx;
    const n = settings.streams;
    const rate = settings.streamsRate;
    const perRound = rate * settings.streamsSeconds;

    // Both sides' streams are open at once (interleaved rounds): the harness holds 2n sockets.
    const ownLimit = await openFilesLimit('self');
    const serviceLimit = await openFilesLimit(service.pid);
    ctx.log(
      `open files (soft limit): harness ${fmtInt(ownLimit)}, service ${fmtInt(serviceLimit)}; ` +
        `needed about ${fmtInt(2 * n + 500)} and ${fmtInt(n + 200)}`,
    );
    if (ownLimit < 2 * n + 500 || serviceLimit < n + 200) {
      throw new Error(
        `too few file descriptors for ${n} streams: raise "ulimit -n" (the service inherits it)`,
      );
    }

    const account = await service.createAccount('bench streams');
    const connection = await expectJson(200, `${service.url}/v1/channels/webchat`, {
      method: 'PUT',
      token: account.apiKey,
      body: {
        provider: 'webchat',
        allowed_origins: [ORIGIN],
        identity_verification: 'off',
        title: 'Bench',
      },
    });
    const widgetSettings = connection.settings as Record<string, unknown> | undefined;
    const widgetKey = stringField(widgetSettings ?? {}, 'widget_key');
    const visitorBase = `${service.url}/webchat/v1/${widgetKey}`;
    const addresses = Math.ceil(n / VISITORS_PER_ADDRESS);
    ctx.log(
      `account ${account.accountId}, webchat connected (PUT /v1/channels/webchat), allowed origin ` +
        `${ORIGIN}; visitors from ${addresses} loopback addresses (127.0.0.2-${addressOf(n - 1)}), ` +
        `${VISITORS_PER_ADDRESS} each, to stay under the limit of 600 visitor requests a minute per address`,
    );

    // Visitors: a session each, then a first message (which makes its contact).
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    ctx.defer(async () => agent.destroy());
    const tokens: string[] = new Array<string>(n);
    const visitorIds: string[] = new Array<string>(n);
    const headers = { origin: ORIGIN };
    const setupS = await forEach(ctx, 'visitors', n, SETUP_CONCURRENCY, async (i) => {
      const from = addressOf(i);
      const session = await postFrom(agent, from, `${visitorBase}/session`, headers, {});
      const body = session.body as { token?: string; visitor?: { id?: string } };
      if (session.status !== 200 || !body.token || !body.visitor?.id) {
        throw new Error(
          `visitor ${i}: POST session answered ${session.status} ${JSON.stringify(session.body).slice(0, 300)}`,
        );
      }
      tokens[i] = body.token;
      visitorIds[i] = body.visitor.id;
      const first = await postFrom(
        agent,
        from,
        `${visitorBase}/messages`,
        { ...headers, authorization: `Bearer ${body.token}` },
        { client_id: `bench-${i}-${randomBytes(6).toString('hex')}`, content: `Hello ${i}` },
      );
      if (first.status !== 201) {
        throw new Error(
          `visitor ${i}: POST messages answered ${first.status} ${JSON.stringify(first.body).slice(0, 300)}`,
        );
      }
    });
    agent.destroy();
    // Each anonymous visitor's contact has a webchat identity named by the visitor id.
    const pool = openPool(await service.databaseUrl());
    let rows: Array<{ external_id: string; contact_id: string }>;
    try {
      ({ rows } = await pool.query<{ external_id: string; contact_id: string }>(
        `SELECT external_id, contact_id FROM contact_identities WHERE account_id = $1 AND channel = 'webchat'`,
        [account.accountId],
      ));
    } finally {
      await pool.end();
    }
    const contactOf = new Map(rows.map((r) => [r.external_id, r.contact_id]));
    const contacts = visitorIds.map((id, i) => {
      const contact = contactOf.get(id);
      if (!contact) throw new Error(`visitor ${i} (${id}) has no contact`);
      return contact;
    });
    ctx.log(
      `${fmtInt(n)} visitors: POST session and a first POST messages each (making the contact) ` +
        `in ${fmt(setupS, 1)} s`,
    );

    // Arrivals of replies, by reply number: when, on which stream, how often.
    const arrivedAt = new Map<number, number>();
    const expectedStream = new Map<number, number>();
    let duplicates = 0;
    let wrongStream = 0;
    const onReply = (v: number) => (event: { event: string; data: string }, at: number) => {
      if (event.event !== 'message') return;
      const message = JSON.parse(event.data) as { author?: string; content?: string };
      if (message.author !== 'team') return; // the visitor's own first message
      const match = /^r(\d+)$/.exec(message.content ?? '');
      if (!match) return;
      const k = Number(match[1]);
      if (expectedStream.get(k) !== v) wrongStream++;
      if (arrivedAt.has(k)) duplicates++;
      else arrivedAt.set(k, at);
    };

    const bare: BareServer = await startBareStreamServer(ctx.projectRoot);
    ctx.defer(() => bare.stop());
    const sides: Side[] = [
      {
        label: 'bare Fastify SSE (baseline)',
        pid: bare.pid,
        streams: [],
        sampler: new RssSampler(bare.pid, RSS_INTERVAL_MS),
        rssBefore: NaN,
        rssWith: NaN,
        openS: NaN,
        rounds: [],
        request: (v, k) => ({
          method: 'POST',
          path: '/push',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ id: String(v), content: `r${k}` }),
        }),
      },
      {
        label: 'service (widget streams)',
        pid: service.pid,
        streams: [],
        sampler: new RssSampler(service.pid, RSS_INTERVAL_MS),
        rssBefore: NaN,
        rssWith: NaN,
        openS: NaN,
        rounds: [],
        request: (v, k) => ({
          method: 'POST',
          path: '/v1/messages/send',
          headers: {
            authorization: `Bearer ${account.apiKey}`,
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            contact_id: contacts[v],
            channel: 'webchat',
            type: 'text',
            content: `r${k}`,
          }),
        }),
      },
    ];
    const [bareSide, serviceSide] = sides as [Side, Side];
    const streamUrl = (side: Side, v: number) =>
      side === bareSide
        ? `${bare.url}/stream?id=${v}`
        : `${visitorBase}/stream?token=${encodeURIComponent(tokens[v] ?? '')}`;
    ctx.defer(async () => {
      for (const side of sides) {
        for (const stream of side.streams) stream.close();
        await side.sampler.stop();
      }
    });

    for (const side of sides) {
      side.sampler.start();
      await delay(RSS_WINDOW_MS);
      const beforeEnd = performance.now();
      side.rssBefore = median(side.sampler.between(beforeEnd - RSS_WINDOW_MS, beforeEnd));
      side.openS = await forEach(ctx, `${side.label} open`, n, OPEN_CONCURRENCY, async (v) => {
        const stream = openSse(streamUrl(side, v), {
          localAddress: addressOf(v),
          headers,
          timeoutMs: OPEN_TIMEOUT_MS,
          onEvent: onReply(v),
        });
        side.streams[v] = stream;
        try {
          await stream.opened;
        } catch (err) {
          throw new Error(
            `${side.label}: stream ${v} did not open: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
      });
      await delay(SETTLE_MS);
      const withStart = performance.now();
      await delay(RSS_WINDOW_MS);
      side.rssWith = median(side.sampler.between(withStart, withStart + RSS_WINDOW_MS));
      ctx.log(
        `${side.label}: ${fmtInt(n)} streams open in ${fmt(side.openS, 1)} s (each answered its ` +
          `first event); RSS ${fmt(side.rssBefore / MIB, 1)} MiB before, ` +
          `${fmt(side.rssWith / MIB, 1)} MiB with them open`,
      );
    }

    // Rounds of replies, interleaved: the baseline, then the service, each round.
    const repliesFrom = performance.now();
    let nextReply = 0;
    let nextVisitor = 0;
    for (let round = 1; round <= settings.runs; round++) {
      for (const side of sides) {
        const first = nextReply;
        const sentAt = new Float64Array(perRound);
        const send = await pacedLoad({
          baseUrl: side === bareSide ? bare.url : service.url,
          rate,
          count: perRound,
          maxInFlight: PACED_MAX_IN_FLIGHT,
          timeoutMs: PACED_TIMEOUT_MS,
          expectedStatus: 201,
          request: (i) => {
            // Replies go round the visitors: each stream gets its share, none twice in a row.
            const v = nextVisitor++ % n;
            const k = first + i;
            expectedStream.set(k, v);
            sentAt[i] = performance.now();
            return side.request(v, k);
          },
        });
        nextReply += perRound;
        const deadline = performance.now() + ARRIVAL_TIMEOUT_MS;
        const arrivedCount = () => {
          let c = 0;
          for (let k = first; k < first + perRound; k++) if (arrivedAt.has(k)) c++;
          return c;
        };
        while (arrivedCount() < send.ok && performance.now() < deadline) await delay(50);
        const latencies: number[] = [];
        for (let i = 0; i < perRound; i++) {
          const at = arrivedAt.get(first + i);
          if (at !== undefined) latencies.push(at - (sentAt[i] ?? NaN));
        }
        const missing = perRound - latencies.length;
        side.rounds.push({ send, latencies, missing });
        ctx.log(
          `  ${side.label}  round ${round}/${settings.runs}: ${fmtInt(send.ok)}/${fmtInt(perRound)} ` +
            `sends 201 at ${fmt(send.sendRate, 1)}/s (most behind schedule ${fmt(send.maxLagMs, 0)} ms, ` +
            `send p50 ${fmt(send.p50Ms, 2)} ms, p99 ${fmt(send.p99Ms, 2)} ms); ` +
            `${fmtInt(latencies.length)} arrived, latency p50 ${fmt(percentile(latencies, 50), 2)} ms, ` +
            `p99 ${fmt(percentile(latencies, 99), 2)} ms`,
        );
      }
    }
    const dropped = sides.map((side) => side.streams.filter((s) => s.ended).length);
    for (const side of sides) {
      for (const stream of side.streams) stream.close();
      await side.sampler.stop();
    }
    await bare.stop();

    const figure = (side: Side, f: (r: Side['rounds'][number]) => number) =>
      median(side.rounds.map(f));
    const table = sides.map((side) => ({
      growth: (side.rssWith - side.rssBefore) / MIB,
      peak: side.sampler.peakSince(repliesFrom) / MIB,
      p50: figure(side, (r) => percentile(r.latencies, 50)),
      p99: figure(side, (r) => percentile(r.latencies, 99)),
      sendP50: figure(side, (r) => r.send.p50Ms),
      sendP99: figure(side, (r) => r.send.p99Ms),
      total: side.rounds.length * perRound,
      failed: side.rounds.reduce((sum, r) => sum + (perRound - r.send.ok), 0),
      missing: side.rounds.reduce((sum, r) => sum + r.missing, 0),
      maxLag: Math.max(...side.rounds.map((r) => r.send.maxLagMs)),
    }));
    const [b, s] = table as [(typeof table)[number], (typeof table)[number]];
    const x = (sv: number, bv: number) =>
      Number.isFinite(sv / bv) && bv > 0 ? (sv / bv).toFixed(2) : 'n/a';
    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    const allArrived = s.failed === 0 && s.missing === 0;
    ctx.log('');
    ctx.log(
      formatTable(
        ['figure', 'service', 'bare', 'x bare', 'target (issue)', 'met'],
        [
          [
            'RSS before the streams, MiB',
            fmt(serviceSide.rssBefore / MIB, 1),
            fmt(bareSide.rssBefore / MIB, 1),
            '',
            '',
            '',
          ],
          [
            `RSS with ${fmtInt(n)} streams open, MiB`,
            fmt(serviceSide.rssWith / MIB, 1),
            fmt(bareSide.rssWith / MIB, 1),
            '',
            '',
            '',
          ],
          [
            'RSS growth, MiB',
            fmt(s.growth, 1),
            fmt(b.growth, 1),
            x(s.growth, b.growth),
            `< ${TARGET_RSS_GROWTH_MIB}`,
            met(s.growth < TARGET_RSS_GROWTH_MIB),
          ],
          [
            'RSS growth per stream, KiB',
            fmt((s.growth * 1024) / n, 1),
            fmt((b.growth * 1024) / n, 1),
            '',
            '',
            '',
          ],
          ['RSS peak during replies, MiB', fmt(s.peak, 1), fmt(b.peak, 1), '', '', ''],
          [
            `reply-to-stream latency p50 at ${rate}/s, ms`,
            fmt(s.p50, 1),
            fmt(b.p50, 1),
            x(s.p50, b.p50),
            '',
            '',
          ],
          [
            `reply-to-stream latency p99 at ${rate}/s, ms`,
            fmt(s.p99, 1),
            fmt(b.p99, 1),
            x(s.p99, b.p99),
            `< ${fmtInt(TARGET_P99_MS)}`,
            met(s.p99 < TARGET_P99_MS),
          ],
          [
            'send request p50, ms',
            fmt(s.sendP50, 2),
            fmt(b.sendP50, 2),
            x(s.sendP50, b.sendP50),
            '',
            '',
          ],
          [
            'send request p99, ms',
            fmt(s.sendP99, 2),
            fmt(b.sendP99, 2),
            x(s.sendP99, b.sendP99),
            '',
            '',
          ],
          [
            'replies arrived / sent',
            `${fmtInt(s.total - s.missing)}/${fmtInt(s.total)}`,
            `${fmtInt(b.total - b.missing)}/${fmtInt(b.total)}`,
            '',
            'all',
            met(allArrived),
          ],
          [
            'streams dropped',
            fmtInt(dropped[1] ?? NaN),
            fmtInt(dropped[0] ?? NaN),
            '',
            '0',
            met(dropped[1] === 0),
          ],
        ],
      ),
    );
    const keptUp = Math.max(s.maxLag, b.maxLag) <= KEPT_UP_LAG_MS;
    if (!keptUp) {
      ctx.log(
        `WARNING: sends fell up to ${fmt(Math.max(s.maxLag, b.maxLag) / 1000, 1)} s behind the ` +
          `schedule (fewer than ${rate} answers/s with ${PACED_MAX_IN_FLIGHT} in flight): the ` +
          'latencies include that queueing, and the send p50/p99 beside them show how much of it ' +
          'is the send request itself',
      );
    }
    ctx.log(
      `(one API process; ${fmtInt(n)} streams on each side, open at once, from one client process; ` +
        `${settings.runs} interleaved rounds of ${fmtInt(perRound)} replies at ${rate}/s, open loop ` +
        `(up to ${PACED_MAX_IN_FLIGHT} in flight), each to the next visitor's stream; latency = ` +
        'the reply event parsed on the stream - the send request started, same clock; medians of ' +
        'the rounds; RSS = VmRSS, medians of 2 s of samples; x bare = service / bare; ' +
        `${duplicates} duplicate and ${wrongStream} misrouted replies; sends ` +
        `${keptUp ? 'on schedule' : `up to ${fmt(Math.max(s.maxLag, b.maxLag), 0)} ms BEHIND schedule`})`,
    );
    if (!allArrived || dropped.some((d) => d > 0) || duplicates > 0 || wrongStream > 0) {
      throw new Error(
        `replies: ${s.failed} sends failed, ${s.missing} did not arrive within ` +
          `${ARRIVAL_TIMEOUT_MS / 1000} s of the round's end (bare: ${b.failed}, ${b.missing}); ` +
          `streams dropped ${dropped.join(' (bare), ')}; ${duplicates} duplicates, ${wrongStream} misrouted`,
      );
    }
  },
};
