import { hubSignature, waContact, waMessage } from '../../test/fake-graph/webhooks.js';
import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { runLoad } from '../lib/load.js';
import { fmt, fmtInt, formatTable } from '../lib/report.js';
import { benchPhone } from '../lib/seed.js';
import type { Suite } from '../lib/suite.js';
import { connectWhatsApp, requireGraph, type WhatsAppChannel } from '../lib/whatsapp.js';

const POLL_MS = 100;
const PROGRESS_EVERY_MS = 5_000;
/** No new message recorded for this long while waiting: processing is stuck, stop. */
const STALL_MS = 60_000;
const POST_TIMEOUT_S = 600;
const TARGET_MESSAGES_PER_S = 2_000;

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

export const whatsappInboundSuite: Suite = {
  name: 'whatsapp-inbound',
  description:
    "Meta's signed inbound message webhooks posted to a WhatsApp Cloud connection: messages " +
    'processed per second, from the first POST until every message is recorded',
  serviceEnv: { ALLOW_PRIVATE_TARGETS: 'true', SANDBOX_AUTO_ADVANCE: 'false' },
  fakeGraph: true,
  async run(ctx) {
    const { service, settings } = ctx;
    const graph = requireGraph(ctx);
    const n = settings.inboundMessages;
    const senders = Math.min(settings.inboundSenders, n);
    const perWebhook = settings.inboundPerWebhook;
    const account = await service.createAccount('bench whatsapp-inbound');
    const channel = await connectWhatsApp(service, graph, account);
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    // Every payload built and signed before the clock starts: the harness only sends bytes.
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
      `connection ${channel.connectionId} (whatsapp_cloud on the fake Graph API); ` +
        `${fmtInt(n)} text messages from ${fmtInt(senders)} senders unknown to the account ` +
        `(each becomes a contact), ${perWebhook} message(s) per webhook: ${fmtInt(webhooks.length)} ` +
        `webhooks of ${fmt(bytes / webhooks.length, 0)} bytes on average, signed ` +
        `X-Hub-Signature-256 with the app secret, POSTed to ${channel.webhookPath.replace(channel.connectionId, '{id}')} ` +
        `by autocannon over ${settings.inboundConnections} connections`,
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
    const perS = n / totalS;
    ctx.log(
      `every webhook answered 200 after ${fmt(postS, 2)} s (${fmtInt(webhooks.length / postS)} webhooks/s, ` +
        `p50 ${fmt(postFigures.p50Ms, 2)} ms, p99 ${fmt(postFigures.p99Ms, 2)} ms); all ${fmtInt(n)} ` +
        `messages recorded after ${fmt(totalS, 2)} s; ${fmtInt(contacts)} contacts, ` +
        `${books?.conversations ?? '?'} conversations, ${books?.webhooks ?? '?'} stored webhooks ` +
        `(${books?.unprocessed ?? '?'} not yet marked processed)`,
    );
    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    ctx.log('');
    ctx.log(
      formatTable(
        ['figure', 'measured', 'target (issue)', 'met'],
        [
          [
            `messages processed/s, first POST to all ${fmtInt(n)} recorded`,
            fmtInt(perS),
            `>= ${fmtInt(TARGET_MESSAGES_PER_S)}`,
            met(perS >= TARGET_MESSAGES_PER_S),
          ],
          [`first POST to all recorded, s`, fmt(totalS, 2), '', ''],
          [`webhooks accepted/s (stored, answered 200)`, fmtInt(webhooks.length / postS), '', ''],
          [`webhook POST p99, ms`, fmt(postFigures.p99Ms, 2), '', ''],
        ],
      ),
    );
    ctx.log(
      `(recorded = rows in messages, polled every ${POLL_MS} ms; ${perWebhook} message(s) per ` +
        'webhook (BENCH_INBOUND_PER_WEBHOOK), every sender new to the account)',
    );
  },
};
