import { hubSignature, waContact, waMessage } from '../../test/fake-graph/webhooks.js';
import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { runLoad } from '../lib/load.js';
import { fmt, fmtInt, formatTable, median } from '../lib/report.js';
import { benchPhone } from '../lib/seed.js';
import type { BenchContext, Suite } from '../lib/suite.js';
import { connectWhatsApp, requireGraph, type WhatsAppChannel } from '../lib/whatsapp.js';

const POLL_MS = 100;
const PROGRESS_EVERY_MS = 5_000;
/** No new message recorded for this long while waiting: processing is stuck, stop. */
const STALL_MS = 60_000;
const POST_TIMEOUT_S = 600;
const TARGET_MESSAGES_PER_S = 2_000;
/** Messages of the warm-up round (its own account), not measured. */
const WARMUP_MESSAGES = 2_000;

/**
 * One webhook as Meta posts it for the `messages` field: `whatsapp_business_account`, one entry
 * (the business account), one change per message, each value naming the phone number it came
 * to and the sender's profile (the shapes of test/fake-graph/webhooks.ts, Meta's examples).
 */
function webhookOf(channel: WhatsAppChannel, messages: Array<{ waId: string; text: string }>) {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: channel.businessAccountId,
        changes: messages.map((m) => ({
          value: {
            messaging_product: 'whatsapp',
            metadata: {
              display_phone_number: channel.displayPhoneNumber,
              phone_number_id: channel.phoneNumberId,
            },
            contacts: [waContact(m.waId, `Bench Sender ${m.waId.slice(-5)}`)],
            messages: [waMessage.text(m.waId, m.text)],
          },
          field: 'messages',
        })),
      },
    ],
  };
}

/** What one round measured: `n` messages posted to a new account's connection and recorded. */
interface RoundFigures {
  /** Messages recorded a second, from the first POST until the last was recorded. */
  perS: number;
  totalS: number;
  /** Webhooks answered 200 a second, from the first POST to the last answer. */
  postPerS: number;
  postP50Ms: number;
  postP99Ms: number;
}

/**
 * One round: a new account and connection (every sender new to it, so each becomes a contact),
 * `n` webhooks built and signed before the clock starts, POSTed by autocannon, and the
 * messages table polled until every message is recorded; the books are checked after.
 */
async function inboundRound(ctx: BenchContext, label: string, n: number): Promise<RoundFigures> {
  const { service, settings } = ctx;
  const graph = requireGraph(ctx);
  const senders = Math.min(settings.inboundSenders, n);
  const perWebhook = settings.inboundPerWebhook;
  const account = await service.createAccount(`bench whatsapp-inbound ${label}`);
  const channel = await connectWhatsApp(service, graph, account);
  const pool = openPool(await service.databaseUrl());
  try {
    const webhooks: Array<{ body: string; signature: string }> = [];
    for (let from = 0; from < n; from += perWebhook) {
      const messages = [];
      for (let i = from; i < Math.min(n, from + perWebhook); i++) {
        messages.push({
          waId: benchPhone(917, i % senders).slice(1),
          text: `Bench inbound ${i}: where is my order?`,
        });
      }
      const body = JSON.stringify(webhookOf(channel, messages));
      webhooks.push({ body, signature: hubSignature(channel.appSecret, body) });
    }
    const bytes = webhooks.reduce((sum, w) => sum + Buffer.byteLength(w.body), 0);
    ctx.log(
      `${label}: connection ${channel.connectionId}; ${fmtInt(n)} text messages from ` +
        `${fmtInt(senders)} senders unknown to the account, ${perWebhook} message(s) per webhook: ` +
        `${fmtInt(webhooks.length)} webhooks of ${fmt(bytes / webhooks.length, 0)} bytes on average`,
    );

    const recorded = async () => {
      const { rows } = await pool.query<{ count: string }>(
        `SELECT count(*) AS count FROM messages WHERE account_id = $1 AND direction = 'inbound'`,
        [account.accountId],
      );
      return Number(rows[0]?.count ?? 0);
    };

    let next = 0;
    const started = performance.now();
    const posting = runLoad(
      {
        name: `POST ${channel.webhookPath}`,
        url: service.url,
        requests: [
          {
            method: 'POST',
            path: channel.webhookPath,
            setupRequest: (req) => {
              const w = webhooks[next++ % webhooks.length]!;
              req.body = w.body;
              req.headers = {
                'content-type': 'application/json',
                'x-hub-signature-256': w.signature,
              };
              return req;
            },
          },
        ],
        expectedStatuses: [200],
      },
      {
        amount: webhooks.length,
        connections: Math.min(settings.inboundConnections, webhooks.length),
        durationS: POST_TIMEOUT_S,
      },
    );
    let postedAt = NaN;
    const posted = posting.then((figures) => {
      postedAt = figures.lastResponseAt;
      return figures;
    });
    // A failed POST run (a refused webhook) stops the wait at the next poll.
    const postFailure: { error?: Error } = {};
    posted.catch(
      (err: unknown) => (postFailure.error = err instanceof Error ? err : new Error(String(err))),
    );

    const deadline = Date.now() + settings.waitTimeoutS * 1000;
    let count = 0;
    let lastCount = -1;
    let lastProgressAt = Date.now();
    let lastLogAt = Date.now();
    let done = NaN;
    for (;;) {
      await delay(POLL_MS);
      if (postFailure.error) throw postFailure.error;
      count = await recorded();
      const now = Date.now();
      if (count >= n) {
        done = performance.now();
        break;
      }
      if (count !== lastCount) {
        lastCount = count;
        lastProgressAt = now;
      }
      if (now - lastLogAt >= PROGRESS_EVERY_MS) {
        lastLogAt = now;
        ctx.log(
          `  ${fmtInt(count)}/${fmtInt(n)} messages recorded after ` +
            `${((performance.now() - started) / 1000).toFixed(1)} s` +
            (Number.isNaN(postedAt) ? '' : ' (every webhook answered)'),
        );
      }
      if (now - lastProgressAt > STALL_MS) {
        throw new Error(`no new inbound message for ${STALL_MS / 1000} s: ${count}/${n} recorded`);
      }
      if (now > deadline) {
        throw new Error(
          `${count}/${n} inbound messages after ${settings.waitTimeoutS} s (BENCH_WAIT_TIMEOUT)`,
        );
      }
    }
    const postFigures = await posted;

    const { rows } = await pool.query<{
      contacts: string;
      conversations: string;
      webhooks: string;
      unprocessed: string;
      distinct_ids: string;
    }>(
      `SELECT (SELECT count(*) FROM contacts WHERE account_id = $1) AS contacts,
              (SELECT count(*) FROM conversations WHERE account_id = $1) AS conversations,
              (SELECT count(*) FROM inbound_webhooks WHERE account_id = $1) AS webhooks,
              (SELECT count(*) FROM inbound_webhooks WHERE account_id = $1 AND processed_at IS NULL) AS unprocessed,
              (SELECT count(DISTINCT provider_message_id) FROM messages
                 WHERE account_id = $1 AND direction = 'inbound') AS distinct_ids`,
      [account.accountId],
    );
    const books = rows[0];
    const contacts = Number(books?.contacts ?? NaN);
    const distinctIds = Number(books?.distinct_ids ?? NaN);
    if (count !== n || distinctIds !== n || contacts !== senders) {
      throw new Error(
        `expected ${n} inbound messages from ${senders} new contacts: ${count} messages ` +
          `(${distinctIds} provider ids), ${contacts} contacts`,
      );
    }
    const postS = (postedAt - started) / 1000;
    const totalS = (done - started) / 1000;
    const figures: RoundFigures = {
      perS: n / totalS,
      totalS,
      postPerS: webhooks.length / postS,
      postP50Ms: postFigures.p50Ms,
      postP99Ms: postFigures.p99Ms,
    };
    ctx.log(
      `${label}: every webhook answered 200 after ${fmt(postS, 2)} s (${fmtInt(figures.postPerS)} ` +
        `webhooks/s, p50 ${fmt(figures.postP50Ms, 2)} ms, p99 ${fmt(figures.postP99Ms, 2)} ms); ` +
        `all ${fmtInt(n)} messages recorded after ${fmt(totalS, 2)} s ` +
        `(${fmtInt(figures.perS)}/s); ${fmtInt(contacts)} contacts, ` +
        `${books?.conversations ?? '?'} conversations, ${books?.webhooks ?? '?'} stored webhooks ` +
        `(${books?.unprocessed ?? '?'} not yet marked processed)`,
    );
    return figures;
  } finally {
    await pool.end();
  }
}

export const whatsappInboundSuite: Suite = {
  name: 'whatsapp-inbound',
  description:
    "Meta's signed inbound message webhooks posted to a WhatsApp Cloud connection: messages " +
    'processed per second, from the first POST until every message is recorded',
  serviceEnv: { ALLOW_PRIVATE_TARGETS: 'true', SANDBOX_AUTO_ADVANCE: 'false' },
  fakeGraph: true,
  async run(ctx) {
    const { settings } = ctx;
    const n = settings.inboundMessages;
    ctx.log(
      `webhooks signed X-Hub-Signature-256 with each connection's app secret, POSTed to ` +
        `/channels/{id}/webhook by autocannon over ${settings.inboundConnections} connections; ` +
        `each round on a new account and WhatsApp connection (fake Graph API)`,
    );
    // Like the other suites' warm-up: the service's code paths compiled before the clock runs.
    if (settings.warmupS > 0) await inboundRound(ctx, 'warm-up', Math.min(n, WARMUP_MESSAGES));
    const rounds: RoundFigures[] = [];
    for (let i = 1; i <= settings.runs; i++) {
      rounds.push(await inboundRound(ctx, `round ${i}/${settings.runs}`, n));
    }
    const mid = (pick: (r: RoundFigures) => number) => median(rounds.map(pick));
    const range = (pick: (r: RoundFigures) => number) =>
      rounds.length > 1
        ? ` (${fmtInt(Math.min(...rounds.map(pick)))}–${fmtInt(Math.max(...rounds.map(pick)))})`
        : '';
    const perS = mid((r) => r.perS);
    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    ctx.log('');
    ctx.log(
      formatTable(
        ['figure', 'measured', 'target (issue)', 'met'],
        [
          [
            `messages processed/s, first POST to all ${fmtInt(n)} recorded`,
            fmtInt(perS) + range((r) => r.perS),
            `>= ${fmtInt(TARGET_MESSAGES_PER_S)}`,
            met(perS >= TARGET_MESSAGES_PER_S),
          ],
          [
            `first POST to all recorded, s`,
            fmt(
              mid((r) => r.totalS),
              2,
            ),
            '',
            '',
          ],
          [
            `webhooks accepted/s (stored, answered 200)`,
            fmtInt(mid((r) => r.postPerS)) + range((r) => r.postPerS),
            '',
            '',
          ],
          [
            `webhook POST p99, ms`,
            fmt(
              mid((r) => r.postP99Ms),
              2,
            ),
            '',
            '',
          ],
        ],
      ),
    );
    ctx.log(
      `(medians of ${rounds.length} round(s), range in brackets; recorded = rows in messages, ` +
        `polled every ${POLL_MS} ms; ${settings.inboundPerWebhook} message(s) per webhook ` +
        '(BENCH_INBOUND_PER_WEBHOOK), every sender new to the account; a warm-up round of ' +
        `${fmtInt(WARMUP_MESSAGES)} messages first unless BENCH_WARMUP=0)`,
    );
  },
};
