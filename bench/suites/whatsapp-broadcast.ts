import { delay } from '../lib/child.js';
import { openPool } from '../lib/db.js';
import { expectJson, stringField } from '../lib/http.js';
import { fmt, fmtInt, formatTable, median } from '../lib/report.js';
import { RssSampler } from '../lib/rss.js';
import { insertTaggedContacts } from '../lib/seed.js';
import type { Suite } from '../lib/suite.js';
import {
  BENCH_TEMPLATE,
  approvedTemplate,
  broadcastStats,
  createTemplateBroadcast,
  type BroadcastBody,
  connectWhatsApp,
  requireGraph,
} from '../lib/whatsapp.js';

const TAG = 'bench-whatsapp-audience';
const POLL_MS = 250;
const PROGRESS_EVERY_MS = 5_000;
const RSS_INTERVAL_MS = 250;
/** The RSS baseline: the service idle for this long before the broadcast is created. */
const BASELINE_MS = 1_000;
const MIB = 1024 * 1024;
const TARGET_RECIPIENTS_PER_S = 5_000;
const TARGET_RSS_GROWTH_MIB = 200;

export const whatsappBroadcastSuite: Suite = {
  name: 'whatsapp-broadcast',
  description:
    'an immediate template broadcast to a tag of seeded contacts on a WhatsApp Cloud connection ' +
    '(fake Graph API): recipients/s and the service RSS',
  serviceEnv: { ALLOW_PRIVATE_TARGETS: 'true', SANDBOX_AUTO_ADVANCE: 'false' },
  fakeGraph: true,
  async run(ctx) {
    const { service, settings } = ctx;
    const graph = requireGraph(ctx);
    const n = settings.whatsappContacts;
    const account = await service.createAccount('bench whatsapp-broadcast');
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());

    const seedStart = performance.now();
    await insertTaggedContacts(pool, {
      accountId: account.accountId,
      tag: TAG,
      count: n,
      area: 718,
      namePrefix: 'Bench WhatsApp Audience',
    });
    const seedS = (performance.now() - seedStart) / 1000;
    await approvedTemplate(service, account);
    const channel = await connectWhatsApp(service, graph, account);
    ctx.log(
      `seeded ${fmtInt(n)} contacts tagged "${TAG}" in ${seedS.toFixed(1)} s (bulk SQL insert, ` +
        `10,000 rows a statement, then ANALYZE) into account ${account.accountId}; template ` +
        `${BENCH_TEMPLATE.name} approved, then whatsapp connected to the fake Graph API ` +
        `(connection ${channel.connectionId})`,
    );
    const env = (name: string, fallback: string) =>
      service.extraEnv[name] ?? process.env[name] ?? fallback;
    ctx.log(
      `service: BROADCAST_BATCH_SIZE=${env('BROADCAST_BATCH_SIZE', '500 (default)')}, ` +
        `BROADCAST_RATE_WHATSAPP=${env('BROADCAST_RATE_WHATSAPP', '0 (default: no limit)')}; ` +
        'the fake Graph API answers every send at once (no status webhooks follow)',
    );
    await graph.reset();

    const sampler = new RssSampler(service.pid, RSS_INTERVAL_MS);
    sampler.start();
    ctx.defer(() => sampler.stop());
    await delay(BASELINE_MS);

    const created = performance.now();
    const broadcast = await createTemplateBroadcast(service.url, account.apiKey, {
      name: 'Bench WhatsApp broadcast',
      tag: TAG,
      code: '#SPRING-SALE',
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
        const { sent, failed } = broadcastStats(state);
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
    await sampler.stop();

    const { sent, failed } = broadcastStats(state);
    if (state.status !== 'sent' || sent !== n || failed !== 0) {
      throw new Error(
        `broadcast ${broadcastId} ended ${JSON.stringify(state.status)} with ${JSON.stringify(state.stats)}, ` +
          `expected sent to ${n}`,
      );
    }
    const { rows } = await pool.query<{ seconds: number | null; messages: string; sent: string }>(
      `SELECT extract(epoch FROM b.completed_at - b.started_at)::float8 AS seconds,
              (SELECT count(*) FROM messages m WHERE m.account_id = b.account_id AND m.broadcast_id = b.id) AS messages,
              (SELECT count(*) FROM messages m WHERE m.account_id = b.account_id AND m.broadcast_id = b.id
                 AND m.status = 'sent' AND m.provider_message_id IS NOT NULL) AS sent
       FROM broadcasts b WHERE b.account_id = $1 AND b.id = $2`,
      [account.accountId, broadcastId],
    );
    const serverS = rows[0]?.seconds ?? NaN;
    const messages = Number(rows[0]?.messages ?? NaN);
    const withIds = Number(rows[0]?.sent ?? NaN);
    if (messages !== n || withIds !== n) {
      throw new Error(
        `${messages} messages carry the broadcast (${withIds} sent with a provider id), expected ${n}`,
      );
    }
    const graphStats = await graph.stats();
    if (graphStats.sent !== n || graphStats.refused + graphStats.invalid + graphStats.other > 0) {
      throw new Error(
        `the fake Graph API answered ${JSON.stringify(graphStats)}, expected ${n} sends`,
      );
    }

    const elapsedS = (done - created) / 1000;
    const perS = n / elapsedS;
    const rssPeak = sampler.peakSince(created);
    const growthMiB = (rssPeak - rssBaseline) / MIB;
    ctx.log(
      `sent: ${fmtInt(sent)} recipients, ${failed} failed, ${fmtInt(messages)} messages sent with ` +
        `a wamid; the fake Graph API answered ${fmtInt(graphStats.sent)} sends; started_at to ` +
        `completed_at in the database: ${fmt(serverS, 2)} s (${fmtInt(n / serverS)}/s)`,
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
        ],
      ),
    );
    ctx.log(
      `(RSS: VmRSS of the service process every ${RSS_INTERVAL_MS} ms; before = median of the ` +
        `${BASELINE_MS / 1000} s before the create, the service idle; one broadcast, no other load)`,
    );
  },
};
