import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { BIG_ACCOUNT_NAME, LONG_PHONE } from '../inbox/data.js';
import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { requestJson } from '../lib/http.js';
import { pacedLoad, type PacedResult } from '../lib/paced.js';
import { fmt, fmtInt, formatTable, median, percentile } from '../lib/report.js';
import { newSignedInAgent, type SignedIn } from '../lib/session.js';
import { openSse, type SseStream } from '../lib/sse.js';
import type { Suite } from '../lib/suite.js';

const SIGN_IN_CONCURRENCY = 4;
const OPEN_TIMEOUT_MS = 60_000;
const PACED_MAX_IN_FLIGHT = 256;
const PACED_TIMEOUT_MS = 10_000;
/** After a round's last inbound message, the events still on their way get this long. */
const ARRIVAL_TIMEOUT_MS = 15_000;
const CONNECTIONS_SAMPLE_MS = 250;
/** Conversations the inbound messages go round. */
const CONVERSATIONS = 1_000;
const TARGET_P99_MS = 500;

/** Where the inbound messages go: a contact and the channel of its conversation. */
interface Sender {
  contact_id?: string;
  phone?: string;
  channel: string;
}

/**
 * Agents of the inbox app at work: each signed in (through the API) with the account's event
 * stream open as the app opens it (`GET /v1/events/stream` with the session cookie, every event),
 * while contacts write in (POST /v1/sandbox/inbound with the API key) at a steady rate: the
 * time from each inbound request's start to each agent's stream carrying its
 * `message.received`. On the seeded database (BENCH_DATABASE_URL) the messages go to open
 * WhatsApp conversations of the account of 1,000,000 (they stay open; their last activity moves);
 * otherwise to a fresh account, from new phones.
 */
export const inboxLiveSuite: Suite = {
  name: 'inbox-live',
  description:
    'agents signed in with the event stream open while inbound messages arrive: ' +
    'inbound-to-agent latency of message.received (the seeded account with BENCH_DATABASE_URL, else a fresh one)',
  // As the inbox suite (so that they share a service): sign-ins and streams count against the
  // per-user limit.
  serviceEnv: { SESSION_RATE_LIMIT_PER_MINUTE: '1000000' },
  async run(ctx) {
    const { service, settings } = ctx;
    const agents = settings.liveAgents;
    const rate = settings.liveRate;
    const perRound = rate * settings.liveSeconds;
    const databaseUrl = await service.databaseUrl();
    const database = new URL(databaseUrl).pathname.slice(1);
    const pool = openPool(databaseUrl);
    ctx.defer(() => pool.end());

    // The account, its API key and the senders.
    let accountId: string;
    let apiKey: string;
    let senders: Sender[];
    const seededAccount = settings.databaseUrl === null ? null : BIG_ACCOUNT_NAME;
    if (seededAccount !== null) {
      const found = await pool.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [
        seededAccount,
      ]);
      const id = found.rows[0]?.id;
      if (id === undefined)
        throw new Error(`no account "${seededAccount}": seed it first (bench/inbox/seed.ts)`);
      accountId = id;
      apiKey = `sb_live_${randomBytes(32).toString('base64url')}`;
      const keyId = `key_bench_live_${randomBytes(8).toString('hex')}`;
      await pool.query(
        `INSERT INTO api_keys (account_id, id, name, key_hash, created_at)
         VALUES ($1, $2, 'bench inbox-live suite', $3, now())`,
        [accountId, keyId, createHash('sha256').update(apiKey).digest('hex')],
      );
      ctx.defer(async () => {
        await pool.query('DELETE FROM api_keys WHERE id = $1', [keyId]);
      });
      // Not the long conversation's contact: the inbox suite reads its 100,000 messages.
      const open = await pool.query<{ contact_id: string }>(
        `SELECT c.contact_id FROM conversations c
         JOIN contacts k ON k.account_id = c.account_id AND k.id = c.contact_id
         WHERE c.account_id = $1 AND c.status = 'open' AND c.channel = 'whatsapp'
           AND k.phone IS DISTINCT FROM $3
         ORDER BY c.id LIMIT $2`,
        [accountId, CONVERSATIONS, LONG_PHONE],
      );
      senders = open.rows.map((r) => ({ contact_id: r.contact_id, channel: 'whatsapp' }));
      ctx.log(
        `account ${accountId} (${seededAccount}, seeded): inbound messages to ${fmtInt(senders.length)} ` +
          `of its open WhatsApp conversations, in turn`,
      );
    } else {
      const account = await service.createAccount('bench inbox-live');
      accountId = account.accountId;
      apiKey = account.apiKey;
      const base = 15_550_000_000 + Math.floor(Math.random() * 1_000_000) * 1_000;
      senders = Array.from({ length: CONVERSATIONS }, (_, i) => ({
        phone: `+${base + i}`,
        channel: 'whatsapp',
      }));
      ctx.log(
        `account ${accountId} (fresh): inbound messages from ${fmtInt(senders.length)} phones, in turn`,
      );
    }

    // The agents: made, invited and signed in through the API; removed through it at the end.
    const password = randomBytes(18).toString('base64url');
    const team: SignedIn[] = [];
    ctx.defer(async () => {
      for (const agent of team)
        await requestJson(`${service.url}/v1/users/${agent.userId}`, {
          method: 'DELETE',
          token: apiKey,
        });
    });
    const signInStart = performance.now();
    let nextAgent = 0;
    await Promise.all(
      Array.from({ length: Math.min(SIGN_IN_CONCURRENCY, agents) }, async () => {
        while (nextAgent < agents) {
          const i = nextAgent++;
          team.push(
            await newSignedInAgent(service.url, apiKey, accountId, {
              name: `Live Agent ${i}`,
              email: `bench-live-${i}-${randomBytes(4).toString('hex')}@example.com`,
              password,
            }),
          );
        }
      }),
    );
    ctx.log(
      `${agents} agents made and signed in (POST /v1/users, /v1/invites/accept, /v1/session) in ` +
        `${fmt((performance.now() - signInStart) / 1000, 1)} s`,
    );

    // Their streams, as the app opens them; each arrival of a message by its content.
    const sentAt = new Map<number, number>();
    const arrivals: Array<Map<number, number>> = team.map(() => new Map());
    let duplicates = 0;
    let otherEvents = 0;
    const streams: SseStream[] = [];
    ctx.defer(async () => {
      for (const s of streams) s.close();
    });
    const onEvent = (a: number) => (event: { event: string; data: string }, at: number) => {
      if (event.event !== 'message.received') {
        otherEvents++;
        return;
      }
      const body = JSON.parse(event.data) as { data?: { content?: string } };
      const match = /^live (\d+)$/.exec(body.data?.content ?? '');
      if (!match) return;
      const k = Number(match[1]);
      const mine = arrivals[a]!;
      if (mine.has(k)) duplicates++;
      else mine.set(k, at);
    };
    for (const [a, agent] of team.entries()) {
      streams.push(
        openSse(`${service.url}/v1/events/stream`, {
          localAddress: '127.0.0.1',
          headers: { cookie: agent.cookie },
          timeoutMs: OPEN_TIMEOUT_MS,
          onEvent: onEvent(a),
        }),
      );
    }
    // A stream answers its first event when there is one: a first message, which every stream
    // must carry before the rounds begin.
    let nextMessage = 0;
    let nextSender = 0;
    const inboundBody = (k: number) =>
      JSON.stringify({
        ...senders[nextSender++ % senders.length],
        type: 'text',
        content: `live ${k}`,
      });
    // A stream opened after a message committed does not carry it: one more every 2 s until
    // every stream has carried one.
    let allOpen = false;
    const opened = Promise.all(streams.map((s) => s.opened)).then(() => {
      allOpen = true;
    });
    while (!allOpen) {
      const warm = await requestJson(`${service.url}/v1/sandbox/inbound`, {
        method: 'POST',
        token: apiKey,
        body: JSON.parse(inboundBody(nextMessage++)) as unknown,
      });
      if (warm.status !== 201)
        throw new Error(
          `POST /v1/sandbox/inbound answered ${warm.status} ${JSON.stringify(warm.body).slice(0, 300)}`,
        );
      await Promise.race([opened, delay(2_000)]);
    }
    ctx.log(
      `${agents} event streams open (GET /v1/events/stream with the session cookie), each carried the first message`,
    );

    // The service's processes and its database connections while the messages arrive.
    const processes = await processTree(service.pid);
    let connectionsMax = 0;
    const connectionStates = new Map<string, number>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await pool.query<{ state: string | null; n: string }>(
          `SELECT state, count(*) AS n FROM pg_stat_activity
           WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
           GROUP BY state`,
          [database],
        );
        const total = rows.reduce((sum, r) => sum + Number(r.n), 0);
        if (total > connectionsMax) {
          connectionsMax = total;
          connectionStates.clear();
          for (const r of rows) connectionStates.set(r.state ?? 'null', Number(r.n));
        }
        await delay(CONNECTIONS_SAMPLE_MS);
      }
    })();

    const rounds: Array<{ send: PacedResult; latencies: number[]; missing: number }> = [];
    for (let round = 1; round <= settings.runs; round++) {
      const firstK = nextMessage;
      const send = await pacedLoad({
        baseUrl: service.url,
        rate,
        count: perRound,
        maxInFlight: PACED_MAX_IN_FLIGHT,
        timeoutMs: PACED_TIMEOUT_MS,
        expectedStatus: 201,
        request: (i) => {
          const k = firstK + i;
          sentAt.set(k, performance.now());
          return {
            method: 'POST',
            path: '/v1/sandbox/inbound',
            headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
            body: inboundBody(k),
          };
        },
      });
      nextMessage += perRound;
      const expected = send.ok * agents;
      const arrived = () => {
        let c = 0;
        for (const mine of arrivals)
          for (let k = firstK; k < firstK + perRound; k++) if (mine.has(k)) c++;
        return c;
      };
      const deadline = performance.now() + ARRIVAL_TIMEOUT_MS;
      while (arrived() < expected && performance.now() < deadline) await delay(100);
      const latencies: number[] = [];
      for (const mine of arrivals) {
        for (let k = firstK; k < firstK + perRound; k++) {
          const at = mine.get(k);
          if (at !== undefined) latencies.push(at - sentAt.get(k)!);
        }
      }
      const missing = perRound * agents - latencies.length;
      rounds.push({ send, latencies, missing });
      ctx.log(
        `  round ${round}/${settings.runs}: ${fmtInt(send.ok)}/${fmtInt(perRound)} inbound 201 at ` +
          `${fmt(send.sendRate, 1)}/s (most behind schedule ${fmt(send.maxLagMs, 0)} ms; request p50 ` +
          `${fmt(send.p50Ms, 2)} ms, p99 ${fmt(send.p99Ms, 2)} ms); ${fmtInt(latencies.length)} ` +
          `arrivals of ${fmtInt(perRound * agents)}, latency p50 ${fmt(percentile(latencies, 50), 1)} ms, ` +
          `p99 ${fmt(percentile(latencies, 99), 1)} ms, max ${fmt(percentile(latencies, 100), 1)} ms`,
      );
    }
    sampling = false;
    await sampler;
    const ended = streams.filter((s) => s.ended).length;

    const all = rounds.flatMap((r) => r.latencies);
    const p99 = median(rounds.map((r) => percentile(r.latencies, 99)));
    ctx.log('');
    ctx.log(
      formatTable(
        [
          'target',
          'p50 ms',
          'p99 ms',
          'p99 of each round',
          'all rounds p50 / p99 / max',
          'target',
          'met',
        ],
        [
          [
            `message.received to ${agents} agents, ${rate}/s for ${settings.liveSeconds} s`,
            fmt(median(rounds.map((r) => percentile(r.latencies, 50))), 1),
            fmt(p99, 1),
            rounds.map((r) => fmt(percentile(r.latencies, 99), 0)).join(' / '),
            `${fmt(percentile(all, 50), 1)} / ${fmt(percentile(all, 99), 1)} / ${fmt(percentile(all, 100), 0)}`,
            `< ${TARGET_P99_MS}`,
            p99 < TARGET_P99_MS && rounds.every((r) => r.missing === 0) ? 'yes' : 'NO',
          ],
        ],
      ),
    );
    ctx.log(
      `(medians of ${settings.runs} rounds; each latency from the start of the inbound request to ` +
        `one agent's stream carrying its message.received; missing ${rounds.map((r) => r.missing).join(' / ')}, ` +
        `duplicates ${duplicates}, other events on the streams ${fmtInt(otherEvents)}, streams ended early ${ended})`,
    );
    ctx.log(
      `service: ${processes.length} process${processes.length === 1 ? '' : 'es'} ` +
        `(pid ${processes.join(', ')}); at most ${connectionsMax} connections to ${database} ` +
        `(${[...connectionStates].map(([s, n]) => `${n} ${s}`).join(', ')}), the bench's own excluded`,
    );
  },
};

/** The process and its descendants (Linux /proc). */
async function processTree(pid: number): Promise<number[]> {
  const out = [pid];
  try {
    const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8'))
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    for (const child of children) out.push(...(await processTree(child)));
  } catch {
    // not Linux, or gone
  }
  return out;
}
