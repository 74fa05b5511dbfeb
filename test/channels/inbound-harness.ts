import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { InboundSink } from '../../src/inbound/inbound-sink.js';
import type { TemplateStatusReport } from '../../src/channels/webhook-content.js';
import { contactProfileJob } from '../../src/inbound/contact-profile.job.js';
import { inboundWebhookJob } from '../../src/inbound/inbound.job.js';
import { InboundWebhooksRepository } from '../../src/inbound/inbound.repository.js';
import { inboundWebhookRoutes } from '../../src/inbound/inbound.routes.js';
import { InboundWebhooksService } from '../../src/inbound/inbound.service.js';
import { ConnectionsRepository } from '../../src/connections/connections.repository.js';
import { SecretBox } from '../../src/connections/secret-box.js';
import { ProviderIdAliasesRepository } from '../../src/inbound/provider-id-aliases.repository.js';
import { GraphClient } from '../../src/channels/meta/graph-client.js';
import { Transactor } from '../../src/db/transactor.js';
import { installAuth } from '../../src/http/auth.js';
import { installErrorHandlers } from '../../src/http/error-handler.js';
import { installInputGuard } from '../../src/http/input-guard.js';
import { ErrorBody } from '../../src/http/schemas.js';
import { MemoryRateLimiter } from '../../src/http/rate-limiter.js';
import { validatorCompiler } from '../../src/http/validation.js';
import { JobQueue } from '../../src/jobs/job-queue.js';
import { JobRunner } from '../../src/jobs/job-runner.js';
import { MediaRepository } from '../../src/media/media.repository.js';
import { mediaRoutes } from '../../src/media/media.routes.js';
import { MediaService } from '../../src/media/media.service.js';
import { startFakeGraph, type FakeGraph } from '../fake-graph/server.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { TestMessagesSink } from './messages-sink.js';

export const PUBLIC_URL = 'https://switchboard.example';
export const GRAPH_VERSION = 'v23.0';

/**
 * The service's app for the rest of the API, plus the provider webhook routes and media routes
 * wired as app.ts is to wire them (until it does), on a real port so webhooks arrive over HTTP
 * the way Meta sends them, with the fake Graph API behind.
 */
export interface InboundHarness {
  t: TestApp;
  graph: FakeGraph;
  /** The webhook and media routes, listening on `url`. */
  app: FastifyInstance;
  url: string;
  inbound: InboundWebhooksService;
  /** Replace to inject faults; defaults to the test sink over today's MessagesService. */
  sink: { current: InboundSink };
  /** The default sink (it also keeps the test's channel identities). */
  testSink: TestMessagesSink;
  templateReports: { accountId: string; report: TemplateStatusReport }[];
  secretBox: SecretBox;
  /** Runs the account's due channel.inbound and contact.profile jobs until none is left. */
  drain(accountId: string): Promise<number>;
  close(): Promise<void>;
}

export async function startInboundHarness(
  opts: { mediaMaxBytes?: number; inlineMax?: number } = {},
) {
  const t = await startTestApp();
  const graph = await startFakeGraph();
  const secretBox = new SecretBox(randomBytes(32));
  const graphClient = new GraphClient({ baseUrl: graph.url, version: GRAPH_VERSION });
  const media = new MediaService({
    media: new MediaRepository(t.db),
    clock: t.clock,
    publicUrl: PUBLIC_URL,
    allowPrivate: true,
  });
  const defaultSink = new TestMessagesSink(t.db, t.clock, t.services.messages);
  const sink = { current: defaultSink as InboundSink };
  const templateReports: InboundHarness['templateReports'] = [];
  const app = Fastify({ logger: { level: 'silent' }, bodyLimit: 1024 * 1024 });
  const inbound = new InboundWebhooksService({
    tx: new Transactor(t.db),
    webhooks: new InboundWebhooksRepository(t.db),
    providerIdAliases: new ProviderIdAliasesRepository(t.db),
    connections: new ConnectionsRepository(t.db),
    secrets: secretBox,
    jobs: new JobQueue(t.clock),
    sink: {
      receive: (scope, m) => sink.current.receive(scope, m),
      receiveMany: (scope, ms) => sink.current.receiveMany(scope, ms),
      applyProviderStatus: (scope, u) => sink.current.applyProviderStatus(scope, u),
      applyProviderStatusMany: (scope, us) => sink.current.applyProviderStatusMany(scope, us),
      knowsIdentity: (scope, who) => sink.current.knowsIdentity(scope, who),
      nameIdentity: (scope, who) => sink.current.nameIdentity(scope, who),
      applyStatusUpTo: (scope, r) => sink.current.applyStatusUpTo(scope, r),
    },
    templates: {
      onTemplateStatus: async (accountId, report) => {
        templateReports.push({ accountId, report });
      },
    },
    media,
    graph: graphClient,
    mediaMaxBytes: opts.mediaMaxBytes ?? 16 * 1024 * 1024,
    clock: t.clock,
    log: app.log,
    // These tests drive the stored webhooks' jobs themselves (the e2e tests run them in-process).
    inlineMax: opts.inlineMax ?? 0,
  });

  app.setValidatorCompiler(validatorCompiler);
  installErrorHandlers(app);
  installInputGuard(app);
  app.addSchema(ErrorBody);
  await app.register(async (hooks) => inboundWebhookRoutes(hooks, inbound));
  const rateLimiter = new MemoryRateLimiter();
  await app.register(
    async (v1) => {
      installAuth(v1, {
        authenticators: {
          apiKey: (key) => t.services.accounts.keyPrincipal(key),
          session: async () => undefined,
        },
        rateLimiter,
      });
      mediaRoutes(v1, media);
    },
    { prefix: '/v1' },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address() as { port: number };

  const handlers = [inboundWebhookJob(inbound), contactProfileJob(inbound)];
  const harness: InboundHarness = {
    t,
    graph,
    app,
    url: `http://127.0.0.1:${address.port}`,
    inbound,
    sink,
    testSink: defaultSink,
    templateReports,
    secretBox,
    drain: async (accountId) => {
      await inbound.settled();
      return new JobRunner({
        db: t.db,
        clock: t.clock,
        log: app.log,
        handlers,
        accountId,
      }).drain();
    },
    close: async () => {
      await app.close();
      await rateLimiter.close();
      await graphClient.close();
      await graph.stop();
      await t.close();
    },
  };
  return harness;
}

export interface WhatsAppConnection {
  id: string;
  accountId: string;
  phoneNumberId: string;
  businessAccountId: string;
  accessToken: string;
  appSecret: string;
  verifyToken: string;
  /** `{service}/channels/{id}/webhook`. */
  webhookUrl: string;
}

let numericIds = Math.floor(Math.random() * 1e9);
const numericId = () => String(100_000_000_000_000 + numericIds++);

/**
 * A WhatsApp connection row as the connections API stores it (settings with the ids, secrets
 * sealed), and its phone number registered at the fake Graph API with the same token.
 */
export async function connectWhatsApp(
  h: InboundHarness,
  accountId: string,
): Promise<WhatsAppConnection> {
  const c = {
    id: `chn_${randomBytes(10).toString('hex')}`,
    accountId,
    phoneNumberId: numericId(),
    businessAccountId: numericId(),
    accessToken: `EAAG${randomBytes(24).toString('hex')}`,
    appSecret: randomBytes(16).toString('hex'),
    verifyToken: `vt_${randomBytes(16).toString('hex')}`,
  };
  const now = new Date();
  await h.t.db.transaction().execute((trx) =>
    new ConnectionsRepository(h.t.db).upsert(trx, {
      account_id: accountId,
      id: c.id,
      channel: 'whatsapp',
      provider: 'whatsapp_cloud',
      status: 'active',
      error: null,
      settings: {
        phone_number_id: c.phoneNumberId,
        business_account_id: c.businessAccountId,
        display_phone_number: '+1 555-078-3881',
        verified_name: 'Test Shop',
      },
      secrets: h.secretBox.seal({ access_token: c.accessToken, app_secret: c.appSecret }),
      verify_token: c.verifyToken,
      created_at: now,
      updated_at: now,
    }),
  );
  h.graph.addPhoneNumber({
    id: c.phoneNumberId,
    token: c.accessToken,
    display_phone_number: '+1 555-078-3881',
    verified_name: 'Test Shop',
    business_account_id: c.businessAccountId,
  });
  return { ...c, webhookUrl: `${h.url}/channels/${c.id}/webhook` };
}

export interface PageConnection {
  id: string;
  accountId: string;
  channel: 'messenger' | 'instagram';
  pageId: string;
  /** Instagram only: the professional account linked to the Page (what its webhooks name). */
  instagramAccountId: string | null;
  /** What the connection's webhooks carry as `entry[].id`. */
  entryId: string;
  pageAccessToken: string;
  appSecret: string;
  verifyToken: string;
  webhookUrl: string;
}

/**
 * A Messenger or Instagram connection row as the connections API stores it, and its Page
 * registered at the fake Graph API with the same token.
 */
export async function connectPage(
  h: InboundHarness,
  accountId: string,
  channel: 'messenger' | 'instagram',
): Promise<PageConnection> {
  const pageId = numericId();
  const instagramAccountId = channel === 'instagram' ? `1784${numericId()}` : null;
  const c = {
    id: `chn_${randomBytes(10).toString('hex')}`,
    accountId,
    channel,
    pageId,
    instagramAccountId,
    entryId: instagramAccountId ?? pageId,
    pageAccessToken: `EAAP${randomBytes(24).toString('hex')}`,
    appSecret: randomBytes(16).toString('hex'),
    verifyToken: `vt_${randomBytes(16).toString('hex')}`,
  };
  const now = new Date();
  await h.t.db.transaction().execute((trx) =>
    new ConnectionsRepository(h.t.db).upsert(trx, {
      account_id: accountId,
      id: c.id,
      channel,
      provider: channel,
      status: 'active',
      error: null,
      settings: {
        page_id: pageId,
        ...(instagramAccountId ? { instagram_account_id: instagramAccountId } : {}),
        page_name: 'Test Shop',
      },
      secrets: h.secretBox.seal({ page_access_token: c.pageAccessToken, app_secret: c.appSecret }),
      verify_token: c.verifyToken,
      created_at: now,
      updated_at: now,
    }),
  );
  h.graph.addPage({
    id: pageId,
    token: c.pageAccessToken,
    name: 'Test Shop',
    ...(instagramAccountId ? { instagram_account_id: instagramAccountId } : {}),
  });
  return { ...c, webhookUrl: `${h.url}/channels/${c.id}/webhook` };
}
