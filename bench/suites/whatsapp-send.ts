import { startBareServer } from '../lib/bare.js';
import { openPool } from '../lib/db.js';
import { expectJson } from '../lib/http.js';
import { measureAgainstBaseline, type LoadTarget } from '../lib/load.js';
import { fmt, fmtInt, formatTable } from '../lib/report.js';
import { benchPhone, seedContacts } from '../lib/seed.js';
import type { BenchAccount } from '../lib/service.js';
import type { Suite } from '../lib/suite.js';
import {
  BENCH_TEMPLATE,
  approvedTemplate,
  connectWhatsApp,
  hasChannelConnections,
  requireGraph,
} from '../lib/whatsapp.js';

const SEED_CONCURRENCY = 20;
const TARGET_WHATSAPP_PER_S = 2_500;
const TARGET_WHATSAPP_P99_MS = 50;
/** The sandbox's send rate on this machine before the send pipeline (issue 11). */
const SANDBOX_BEFORE_PER_S = 3_100;

interface Sender {
  label: string;
  account: BenchAccount;
  contacts: string[];
  sends: number;
}

export const whatsappSendSuite: Suite = {
  name: 'whatsapp-send',
  description:
    'POST /v1/messages/send (template, whatsapp) on a WhatsApp Cloud connection (fake Graph API) ' +
    'and on the sandbox, against a bare Fastify route',
  // No simulated delivered/read jobs after sandbox sends: they would run during the next
  // target's runs. The WhatsApp provider has none (Meta's status webhooks are not simulated).
  serviceEnv: { ALLOW_PRIVATE_TARGETS: 'true', SANDBOX_AUTO_ADVANCE: 'false' },
  fakeGraph: true,
  async run(ctx) {
    const { service, settings } = ctx;
    const graph = requireGraph(ctx);
    const poolSize = settings.messagesContacts;

    const sandbox: Sender = {
      label: 'sandbox',
      account: await service.createAccount('bench whatsapp-send sandbox'),
      contacts: [],
      sends: 0,
    };
    const withConnections = await hasChannelConnections(service, sandbox.account);
    const senders = [sandbox];
    let whatsapp: Sender | null = null;
    if (withConnections) {
      whatsapp = {
        label: 'whatsapp_cloud',
        account: await service.createAccount('bench whatsapp-send cloud'),
        contacts: [],
        sends: 0,
      };
      senders.push(whatsapp);
    } else {
      ctx.log(
        'this build has no channel connections (GET /v1/channels is not there): measuring the sandbox only',
      );
    }

    for (const [i, sender] of senders.entries()) {
      const seedStart = performance.now();
      sender.contacts = await seedContacts(
        service.url,
        sender.account.apiKey,
        poolSize,
        SEED_CONCURRENCY,
        (n) => ({ phone: benchPhone(312 + i, n), name: `Bench Recipient ${n}` }),
      );
      await approvedTemplate(service, sender.account);
      ctx.log(
        `${sender.label}: account ${sender.account.accountId}, ${fmtInt(poolSize)} contacts seeded ` +
          `through POST /v1/contacts in ${((performance.now() - seedStart) / 1000).toFixed(1)} s, ` +
          `template ${BENCH_TEMPLATE.name} created and approved through the sandbox review`,
      );
    }
    if (whatsapp) {
      // After the template: on a whatsapp_cloud connection templates are Meta's to review.
      const channel = await connectWhatsApp(service, graph, whatsapp.account);
      ctx.log(
        `whatsapp_cloud: connected (PUT /v1/channels/whatsapp, credentials checked with the fake ` +
          `Graph API), connection ${channel.connectionId}, phone number id ${channel.phoneNumberId}`,
      );
    }

    const sendBody = (sender: Sender) => {
      const n = sender.sends++;
      return JSON.stringify({
        contact_id: sender.contacts[n % sender.contacts.length],
        channel: 'whatsapp',
        type: 'template',
        template_name: BENCH_TEMPLATE.name,
        template_params: [`Customer ${n}`, `#${100_000 + n}`],
      });
    };
    // One send each, checked end to end, before the load.
    let sample: Record<string, unknown> = {};
    for (const sender of senders) {
      const first = await expectJson(201, `${service.url}/v1/messages/send`, {
        method: 'POST',
        token: sender.account.apiKey,
        body: JSON.parse(sendBody(sender)) as unknown,
      });
      if (first.status !== 'sent') {
        throw new Error(`${sender.label}: the first send answered ${JSON.stringify(first)}`);
      }
      sample = first;
    }
    if (whatsapp && (await graph.stats()).sent !== 1) {
      throw new Error(`the fake Graph API counted ${(await graph.stats()).sent} sends, expected 1`);
    }
    await graph.reset();

    const bodyBytes = Buffer.byteLength(JSON.stringify(sample));
    const bare = await startBareServer(ctx.projectRoot, sample);
    ctx.defer(() => bare.stop());
    const target = (sender: Sender): LoadTarget => ({
      name: `POST /v1/messages/send (${sender.label})`,
      url: service.url,
      requests: [
        {
          method: 'POST',
          path: '/v1/messages/send',
          headers: {
            authorization: `Bearer ${sender.account.apiKey}`,
            'content-type': 'application/json',
          },
          setupRequest: (req) => {
            req.body = sendBody(sender);
            return req;
          },
        },
      ],
      expectedStatuses: [201],
    });
    const targets = [
      { name: 'bare Fastify GET (baseline)', url: bare.url },
      ...senders.map(target),
    ];
    // Twice: at BENCH_CONNECTIONS, where a send's latency (two database round trips and the
    // provider's answer) bounds the rate before the machine is busy (Little's law: 20
    // connections / 12 ms = 1,700/s); and at enough connections to keep the machine busy, where
    // the rate is what the service can carry.
    const results = await measureAgainstBaseline(ctx, targets);
    const busy = await measureAgainstBaseline(ctx, targets, settings.sendConnections);
    await bare.stop();

    // Every answer was a 201; the books say whether each was `sent` (not `queued` or `failed`).
    const pool = openPool(await service.databaseUrl());
    ctx.defer(() => pool.end());
    for (const sender of senders) {
      const { rows } = await pool.query<{ status: string; count: string }>(
        `SELECT status, count(*) AS count FROM messages
         WHERE account_id = $1 AND direction = 'outbound' GROUP BY status ORDER BY status`,
        [sender.account.accountId],
      );
      const byStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.count)]));
      const total = rows.reduce((sum, r) => sum + Number(r.count), 0);
      ctx.log(
        `${sender.label}: ${fmtInt(sender.sends)} sends (warm-up included), messages by status ` +
          `${JSON.stringify(byStatus)}`,
      );
      if (total !== sender.sends || (byStatus.sent ?? 0) !== total) {
        throw new Error(`${sender.label}: expected ${sender.sends} messages, all sent`);
      }
    }
    if (whatsapp) {
      const stats = await graph.stats();
      ctx.log(`fake Graph API: ${JSON.stringify(stats)}`);
      if (stats.sent !== whatsapp.sends - 1 || stats.refused + stats.invalid + stats.other > 0) {
        throw new Error(
          `the fake Graph API answered ${stats.sent} sends, expected ${whatsapp.sends - 1}`,
        );
      }
    }

    const met = (ok: boolean) => (ok ? 'yes' : 'NO');
    const rows: string[][] = [];
    for (const [connections, [, sandboxResult, whatsappResult]] of [
      [settings.connections, results],
      [settings.sendConnections, busy],
    ] as const) {
      const at = `${connections} connections`;
      if (whatsappResult) {
        rows.push(
          [
            `whatsapp_cloud req/s, ${at}`,
            fmtInt(whatsappResult.reqPerSec),
            `>= ${fmtInt(TARGET_WHATSAPP_PER_S)}`,
            met(whatsappResult.reqPerSec >= TARGET_WHATSAPP_PER_S),
          ],
          [
            `whatsapp_cloud p99 ms, ${at}`,
            fmt(whatsappResult.p99Ms, 2),
            `< ${TARGET_WHATSAPP_P99_MS}`,
            met(whatsappResult.p99Ms < TARGET_WHATSAPP_P99_MS),
          ],
        );
      }
      if (sandboxResult) {
        rows.push([
          `sandbox req/s, ${at}`,
          fmtInt(sandboxResult.reqPerSec),
          `no slower than before (~${fmtInt(SANDBOX_BEFORE_PER_S)})`,
          sandboxResult.reqPerSec >= SANDBOX_BEFORE_PER_S ? 'yes' : 'compare',
        ]);
      }
    }
    ctx.log('');
    ctx.log(formatTable(['figure', 'measured', 'target (issue)', 'met'], rows));
    ctx.log(
      `(template sends on channel whatsapp cycling through ${fmtInt(poolSize)} contacts per account; ` +
        `the bare route answers one ${bodyBytes}-byte message; "before" is the figure the issue ` +
        'quotes: run this suite with BENCH_SERVICE_ROOT=<a checkout of the older build> to measure it)',
    );
  },
};
