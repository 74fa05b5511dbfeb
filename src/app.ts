import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { pino } from 'pino';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { sql } from 'kysely';
import { AccountsRepository, type KeyOwner } from './accounts/accounts.repository.js';
import { AccountsService } from './accounts/accounts.service.js';
import { adminRoutes } from './admin/admin.routes.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { ContactsRepository } from './contacts/contacts.repository.js';
import type { Contact } from './contacts/contacts.schema.js';
import { contactsRoutes } from './contacts/contacts.routes.js';
import { ContactsService } from './contacts/contacts.service.js';
import { ContactIdentitiesRepository } from './contacts/identities.repository.js';
import { ContactMergeRepository } from './contacts/merge.repository.js';
import type { Db } from './db/database.js';
import { ReadCache } from './db/read-cache.js';
import { Transactor } from './db/transactor.js';
import { Outbox } from './events/outbox.js';
import { EventFeed } from './events/event-feed.js';
import { Notifications } from './realtime/notifications.js';
import { EventStreamService, type EventStreamLimits } from './events/event-stream.service.js';
import { EventsRepository } from './events/events.repository.js';
import { eventsRoutes } from './events/events.routes.js';
import { installApiAuth } from './accounts/api-auth.js';
import {
  answerClientError,
  answerRouterError,
  databaseUnavailable,
  installErrorHandlers,
} from './http/error-handler.js';
import { installIdempotency } from './http/idempotency.js';
import { installInputGuard } from './http/input-guard.js';
import type { RateLimiter } from './http/rate-limiter.js';
import type { ChannelProvider, ResolvedProvider } from './channels/channel.js';
import type { Channel } from './db/schema.js';
import { SandboxProvider } from './channels/sandbox/sandbox.provider.js';
import { sandboxRoutes } from './sandbox/sandbox.routes.js';
import { SandboxService } from './sandbox/sandbox.service.js';
import { sandboxStatusJob } from './sandbox/sandbox-status.job.js';
import { ConnectionsRepository, type ConnectionRow } from './connections/connections.repository.js';
import { connectionsRoutes } from './connections/connections.routes.js';
import { ConnectionsService } from './connections/connections.service.js';
import {
  ConnectionProviderResolver,
  type ProviderFactory,
} from './connections/provider-resolver.js';
import { SecretBox } from './connections/secret-box.js';
import { GraphClient } from './channels/meta/graph-client.js';
import { InboundWebhooksRepository } from './inbound/inbound.repository.js';
import { inboundWebhookRoutes } from './inbound/inbound.routes.js';
import { InboundWebhooksService } from './inbound/inbound.service.js';
import { contactProfileJob } from './inbound/contact-profile.job.js';
import { inboundWebhookJob } from './inbound/inbound.job.js';
import { MediaRepository } from './media/media.repository.js';
import { mediaRoutes } from './media/media.routes.js';
import { MediaService } from './media/media.service.js';
import { WhatsAppCloudProvider } from './channels/whatsapp/whatsapp-cloud.provider.js';
import { PageMessagingProvider } from './channels/meta-pages/page-messaging.provider.js';
import { ProviderIdAliasesRepository } from './inbound/provider-id-aliases.repository.js';
import { WhatsAppTemplates } from './channels/whatsapp/templates.js';
import { ConversationsRepository } from './conversations/conversations.repository.js';
import { conversationsRoutes } from './conversations/conversations.routes.js';
import { ConversationsService } from './conversations/conversations.service.js';
import { JobQueue } from './jobs/job-queue.js';
import type { JobHandler } from './jobs/job-runner.js';
import { mediaFetcher, type MediaFetcher } from './messages/media.js';
import { MessagesRepository } from './messages/messages.repository.js';
import { messagesRoutes } from './messages/messages.routes.js';
import { MessagesService } from './messages/messages.service.js';
import { messageSendJob } from './messages/message-send.job.js';
import { SendPipeline } from './messages/send-pipeline.js';
import { BroadcastStats } from './broadcasts/broadcast-stats.js';
import { TemplatesRepository, type TemplateRow } from './templates/templates.repository.js';
import { templatesRoutes } from './templates/templates.routes.js';
import { TemplatesService } from './templates/templates.service.js';
import { UsersRepository } from './users/users.repository.js';
import { usersRoutes } from './users/users.routes.js';
import { UsersService } from './users/users.service.js';
import { broadcastSendJob } from './broadcasts/broadcast-send.job.js';
import { ClaimKeeper } from './jobs/claim-keeper.js';
import { BroadcastsRepository } from './broadcasts/broadcasts.repository.js';
import { broadcastsRoutes } from './broadcasts/broadcasts.routes.js';
import { BroadcastsService } from './broadcasts/broadcasts.service.js';
import { WebhooksRepository } from './webhooks/webhooks.repository.js';
import { webhooksRoutes } from './webhooks/webhooks.routes.js';
import { WebhooksService } from './webhooks/webhooks.service.js';
import { ErrorBody, NoQuery } from './http/schemas.js';
import { Metrics } from './metrics/metrics.js';
import { installRequestMetrics, metricsRoutes } from './metrics/metrics.routes.js';
import { validatorCompiler } from './http/validation.js';
import { WebchatWakeups } from './webchat/webchat-wakeups.js';
import { WebchatProvider } from './channels/webchat/webchat.provider.js';
import { WebchatRepository } from './webchat/webchat.repository.js';
import { webchatRoutes, type WebchatLimits } from './webchat/webchat.routes.js';
import { WebchatService } from './webchat/webchat.service.js';
import { VisitorStreams } from './webchat/visitor-stream.js';
import { VisitorTokens } from './webchat/visitor-token.js';
import { widgetRoute } from './webchat/widget.route.js';
import { AppError } from './errors.js';

export const BODY_LIMIT = 1024 * 1024;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export type AppConfig = Pick<
  Config,
  | 'adminToken'
  | 'metricsToken'
  | 'logLevel'
  | 'allowPrivateTargets'
  | 'sandboxAutoAdvance'
  | 'sandboxDeliveredAfterMs'
  | 'sandboxReadAfterMs'
  | 'broadcastRatePerSecond'
  | 'broadcastBatchSize'
  | 'mediaFetchConcurrency'
  | 'sandboxEnabled'
  | 'metaGraphUrl'
  | 'metaGraphVersion'
  | 'publicUrl'
  | 'secretsKey'
  | 'mediaMaxBytes'
> &
  /** Believe no X-Forwarded-For when absent. */
  Partial<Pick<Config, 'trustProxy'>>;

export interface AppDeps {
  config: AppConfig;
  db: Db;
  rateLimiter: RateLimiter;
  clock: Clock;
  /** Replaces the guarded media fetcher (benchmarks only). */
  fetchMedia?: MediaFetcher;
  /** Where services log outside a request (the HTTP app's logger; a new one by default). */
  log?: FastifyBaseLogger;
  /** How long a send's first attempt holds its job before a runner may send again (tests). */
  sendLeaseMs?: number;
  /** How long an API send waits for the provider's answer (tests; 10 s by default). */
  sendWaitMs?: number;
  /** Replaces the providers of some channels, whatever their connections (tests only). */
  providers?: Partial<Record<Channel, ChannelProvider>>;
  /**
   * The database the process LISTENs on (read caches, event streams, widget streams); without
   * one, the caches stay off and open streams poll every second.
   */
  eventFeedUrl?: string | null;
  /** Keep-alive interval and caps of the live event streams (tests). */
  eventStreams?: EventStreamLimits;
  /** The webchat visitor endpoints' rate limits (tests; defaults otherwise). */
  webchatLimits?: WebchatLimits;
}

/** Every service, built once from the few repositories and adapters each one uses. */
export function buildServices(deps: Omit<AppDeps, 'rateLimiter'>) {
  const { db, clock, config } = deps;
  const log = deps.log ?? pino({ level: config.logLevel });
  const tx = new Transactor(db);
  const outbox = new Outbox(clock);
  const jobs = new JobQueue(clock);
  const usersRepo = new UsersRepository(db);
  const conversationsRepo = new ConversationsRepository(db);
  const messagesRepo = new MessagesRepository(db);
  const broadcastsRepo = new BroadcastsRepository(db);
  const metrics = new Metrics();

  // Disabled (every read goes to the database) until a CacheFeed listens for changes.
  const caches = {
    keys: new ReadCache<KeyOwner>({ maxEntries: 10_000, ttlMs: 60_000 }),
    contact: new ReadCache<Contact>({ maxEntries: 10_000, ttlMs: 60_000 }),
    connection: new ReadCache<ResolvedProvider>({ maxEntries: 10_000, ttlMs: 60_000 }),
    /** Connections by id, for the provider webhook routes (cleared on any connection change). */
    connectionById: new ReadCache<ConnectionRow>({ maxEntries: 10_000, ttlMs: 60_000 }),
    /** Approved templates by account and name. */
    template: new ReadCache<TemplateRow>({ maxEntries: 10_000, ttlMs: 60_000 }),
  };
  const accounts = new AccountsService({
    db,
    accounts: new AccountsRepository(db),
    clock,
    cache: caches.keys,
  });
  const contacts = new ContactsService({
    tx,
    contacts: new ContactsRepository(db),
    identities: new ContactIdentitiesRepository(db),
    merges: new ContactMergeRepository(),
    outbox,
    clock,
    cache: caches.contact,
  });
  const users = new UsersService({ tx, users: usersRepo, clock });
  const webchatWakeups = new WebchatWakeups(db);
  const webchatProvider = new WebchatProvider(webchatWakeups);
  const sandbox = new SandboxProvider({
    autoAdvance: config.sandboxAutoAdvance,
    deliveredAfterMs: config.sandboxDeliveredAfterMs,
    readAfterMs: config.sandboxReadAfterMs,
  });
  const graph = new GraphClient({
    baseUrl: config.metaGraphUrl,
    version: config.metaGraphVersion,
    allowPrivateDownloads: config.allowPrivateTargets,
  });
  const connectionsRepo = new ConnectionsRepository(db);
  const secretBox = config.secretsKey ? new SecretBox(config.secretsKey) : null;
  // The connection shows Graph's refusal of its token until it is connected again.
  const refused = (row: ConnectionRow, reason: string) =>
    connections
      .recordRefusal(row, reason)
      .catch((err: unknown) =>
        log.error({ err, connection: row.id }, 'recording a refused token failed'),
      );
  const providerIdAliases = new ProviderIdAliasesRepository(db);
  // Messenger and Instagram both send through the Page's Send API with the page token.
  const pageProvider =
    (channel: 'messenger' | 'instagram'): ProviderFactory =>
    ({ row, secrets }) =>
      new PageMessagingProvider({
        graph,
        channel,
        pageId: String(row.settings.page_id),
        pageAccessToken: secrets.page_access_token!,
        tokenRefused: (reason) => refused(row, reason),
        // A caption's own message id names the message too (reads and deliveries may name it).
        captionSent: (attachmentId, captionId) =>
          providerIdAliases
            .add(row.account_id, captionId, attachmentId, clock.now())
            .catch((err: unknown) =>
              log.error(
                { err, connection: row.id, message: attachmentId },
                'recording a caption’s message id failed; reports naming it will be dropped',
              ),
            ),
        captionFailed: (attachmentId, reason) =>
          log.warn(
            { connection: row.id, message: attachmentId, reason },
            'caption not sent; the attachment was, so the message stays sent without it',
          ),
      });
  const resolver = new ConnectionProviderResolver({
    connections: connectionsRepo,
    secretBox,
    sandbox,
    sandboxEnabled: config.sandboxEnabled,
    factories: {
      messenger: pageProvider('messenger'),
      instagram: pageProvider('instagram'),
      whatsapp_cloud: ({ row, secrets }) =>
        new WhatsAppCloudProvider({
          graph,
          phoneNumberId: String(row.settings.phone_number_id),
          accessToken: secrets.access_token!,
          tokenRefused: (reason) => refused(row, reason),
        }),
      webchat: () => webchatProvider,
    },
    cache: caches.connection,
    overrides: deps.providers,
  });
  const webchatVisitors = new WebchatRepository(db);
  const connections = new ConnectionsService({
    tx,
    connections: connectionsRepo,
    graph,
    secretBox,
    clock,
    publicUrl: config.publicUrl,
    sandboxEnabled: config.sandboxEnabled,
    changed: (accountId, channel) => {
      resolver.forget(accountId, channel);
      caches.connectionById.clear();
    },
    visitors: webchatVisitors,
  });
  const broadcastStats = new BroadcastStats({ broadcasts: broadcastsRepo, clock });
  const pipeline = new SendPipeline({
    db,
    messages: messagesRepo,
    providers: resolver,
    jobs,
    outbox,
    metrics,
    clock,
    observer: broadcastStats,
    leaseMs: deps.sendLeaseMs,
  });
  const templates = new TemplatesService({
    tx,
    templates: new TemplatesRepository(db),
    cache: caches.template,
    clock,
    // Templates of an account whose WhatsApp is connected to the Cloud API are Meta's.
    whatsappTemplates: async (accountId) => {
      const row = await connectionsRepo.findByChannel(accountId, 'whatsapp');
      if (!row || row.provider !== 'whatsapp_cloud' || !row.secrets || !secretBox) return null;
      return new WhatsAppTemplates({
        graph,
        businessAccountId: String(row.settings.business_account_id),
        accessToken: secretBox.open(row.secrets).access_token!,
      });
    },
  });
  const conversations = new ConversationsService({
    tx,
    conversations: conversationsRepo,
    messages: messagesRepo,
    users: usersRepo,
    outbox,
    clock,
  });
  const messages = new MessagesService({
    tx,
    messages: messagesRepo,
    conversations: conversationsRepo,
    contacts,
    templates,
    providers: resolver,
    pipeline,
    jobs,
    observer: broadcastStats,
    sendLeaseMs: deps.sendLeaseMs,
    sendWaitMs: deps.sendWaitMs,
    outbox,
    fetchMedia:
      deps.fetchMedia ??
      mediaFetcher({
        allowPrivate: config.allowPrivateTargets,
        concurrency: config.mediaFetchConcurrency,
      }),
    clock,
  });
  const webhooks = new WebhooksService({
    tx,
    webhooks: new WebhooksRepository(db),
    clock,
    allowPrivate: config.allowPrivateTargets,
  });
  const broadcasts = new BroadcastsService({
    tx,
    broadcasts: broadcastsRepo,
    messages,
    providers: resolver,
    templates,
    jobs,
    outbox,
    clock,
    batchSize: config.broadcastBatchSize,
    ratePerSecond: config.broadcastRatePerSecond,
    metrics,
  });
  const media = new MediaService({
    media: new MediaRepository(db),
    clock,
    publicUrl: config.publicUrl,
    allowPrivate: config.allowPrivateTargets,
  });
  const inbound = new InboundWebhooksService({
    tx,
    tokenRefused: refused,
    webhooks: new InboundWebhooksRepository(db),
    providerIdAliases,
    connections: connectionsRepo,
    connectionCache: caches.connectionById,
    secrets: secretBox,
    jobs,
    // Provider messages and reports take the path, and emit the events, of every other.
    sink: {
      receive: async (scope, m) => {
        await messages.receive(scope, m);
        return 'recorded';
      },
      receiveMany: async (scope, ms) =>
        (await messages.receiveMany(scope, ms)).map((r) =>
          r instanceof AppError ? r : ('recorded' as const),
        ),
      knowsIdentity: (scope, who) => messages.knowsIdentity(scope, who),
      nameIdentity: (scope, who) =>
        contacts.nameIdentityIfUnnamed(scope, who.channel, who.identity, who.name),
      applyStatusUpTo: (scope, report) => messages.applyStatusUpTo(scope, report),
      applyProviderStatusMany: (scope, updates) => messages.applyProviderStatusMany(scope, updates),
      applyProviderStatus: async (scope, u) =>
        (await messages.applyProviderStatus(scope, { ...u, reason: u.reason ?? undefined }))
          ? 'applied'
          : 'unknown',
    },
    templates: {
      onTemplateStatus: async (accountId, update) => {
        await templates.applyProviderStatus(accountId, update);
      },
    },
    media,
    graph,
    mediaMaxBytes: config.mediaMaxBytes,
    clock,
    log,
  });
  // One listening connection per process: the read caches', the event streams' and the widget's.
  const streamLog = deps.log ?? pino({ level: config.logLevel });
  const notifications = new Notifications({ url: deps.eventFeedUrl ?? null, log: streamLog });
  const eventFeed = new EventFeed({ notifications });
  const eventStreams = new EventStreamService({
    events: new EventsRepository(db),
    feed: eventFeed,
    clock,
    log: streamLog,
    limits: deps.eventStreams,
  });
  const webchat = new WebchatService({
    tx,
    webchat: webchatVisitors,
    connections: connectionsRepo,
    contacts,
    messages,
    secretBox,
    tokens: config.secretsKey ? new VisitorTokens(config.secretsKey) : null,
    wakeups: webchatWakeups,
    clock,
  });
  const visitorStreams = new VisitorStreams({ webchat, limits: deps.webchatLimits });
  const jobHandlers = [
    sandboxStatusJob(messages),
    broadcastSendJob(broadcasts, new ClaimKeeper({ db, clock, jobs })),
    messageSendJob(messages, messagesRepo),
    inboundWebhookJob(inbound),
    contactProfileJob(inbound),
  ] as JobHandler[];
  return {
    accounts,
    contacts,
    users,
    templates,
    conversations,
    messages,
    sandbox,
    sandboxControls: new SandboxService({ sandbox, messages, templates, connections }),
    webhooks,
    broadcasts,
    connections,
    resolver,
    graph,
    inbound,
    media,
    notifications,
    eventFeed,
    eventStreams,
    webchat,
    visitorStreams,
    jobHandlers,
    caches,
    metrics,
  };
}
export type Services = ReturnType<typeof buildServices>;

export async function buildApp(
  deps: AppDeps,
): Promise<{ app: FastifyInstance; services: Services }> {
  const services = buildServices(deps);
  const app = Fastify({
    logger: {
      level: deps.config.logLevel,
      redact: {
        paths: ['req.headers.authorization', 'req.headers["idempotency-key"]'],
        remove: true,
      },
    },
    bodyLimit: BODY_LIMIT,
    trustProxy: trustProxyOption(deps.config.trustProxy ?? false),
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: { customOptions: {} },
    routerOptions: { ignoreTrailingSlash: true },
    frameworkErrors: answerRouterError,
    clientErrorHandler: answerClientError,
    // A missing Host is refused in the error envelope by installErrorHandlers, not by Node.
    http: { requireHostHeader: false },
  });
  app.setValidatorCompiler(validatorCompiler);
  // Webhooks being processed right after their storage finish before Graph's client closes.
  app.addHook('onClose', async () => {
    await services.inbound.settled();
    await services.graph.close();
  });
  // Open event and widget streams would keep close() waiting forever: they end first (clients
  // reconnect).
  app.addHook('preClose', (done) => {
    services.eventStreams.closeAll();
    services.visitorStreams.closeAll();
    done();
  });
  app.addHook('onClose', async () => {
    services.eventFeed.stop();
    await services.notifications.stop();
  });
  installErrorHandlers(app);
  installInputGuard(app);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    done();
  });
  installRequestMetrics(app, services.metrics);
  app.addSchema(ErrorBody);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Switchboard API',
        version: '1.0.0',
        description:
          'Customer messaging platform: contacts, conversations, messages, broadcasts and signed webhooks.',
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      },
      servers: [{ url: deps.config.publicUrl, description: 'This service (PUBLIC_URL)' }],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key: `Authorization: Bearer <key>`.',
          },
          adminToken: {
            type: 'http',
            scheme: 'bearer',
            description: 'The operator token set in ADMIN_TOKEN.',
          },
        },
      },
      security: [{ apiKey: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true });

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async () => {
    try {
      await sql`SELECT 1`.execute(deps.db);
      return { status: 'ok' };
    } catch {
      throw databaseUnavailable('database unreachable');
    }
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  metricsRoutes(app, {
    metrics: services.metrics,
    db: deps.db,
    clock: deps.clock,
    token: deps.config.metricsToken,
    jobKinds: services.jobHandlers.map((h) => h.kind),
  });

  await app.register(
    async (v1) => {
      // A typo in a query parameter must not pass silently, on routes that take none too.
      v1.addHook('onRoute', (route) => {
        route.schema ??= {};
        route.schema.querystring ??= NoQuery;
      });
      installApiAuth(v1, { accounts: services.accounts, rateLimiter: deps.rateLimiter });
      installIdempotency(v1, { db: deps.db, clock: deps.clock });
      contactsRoutes(v1, services.contacts);
      usersRoutes(v1, services.users);
      templatesRoutes(v1, services.templates);
      conversationsRoutes(v1, services.conversations);
      messagesRoutes(v1, services.messages);
      if (deps.config.sandboxEnabled) sandboxRoutes(v1, services.sandboxControls);
      webhooksRoutes(v1, services.webhooks);
      broadcastsRoutes(v1, services.broadcasts);
      mediaRoutes(v1, services.media);
      connectionsRoutes(v1, services.connections);
      eventsRoutes(v1, services.eventStreams);
    },
    { prefix: '/v1' },
  );

  // Providers' webhooks: outside /v1, no API key; the signature is the credential.
  await app.register(async (hooks) => inboundWebhookRoutes(hooks, services.inbound));

  // Webchat: the widget script, and its visitors' endpoints (their own CORS and tokens).
  widgetRoute(app);
  await app.register(
    async (visitors) =>
      webchatRoutes(visitors, {
        webchat: services.webchat,
        streams: services.visitorStreams,
        rateLimiter: deps.rateLimiter,
        limits: deps.webchatLimits,
      }),
    { prefix: '/webchat/v1' },
  );

  const adminToken = deps.config.adminToken;
  if (adminToken) {
    await app.register(
      async (admin) => adminRoutes(admin, { accounts: services.accounts, adminToken }),
      {
        prefix: '/admin',
      },
    );
  }
  return { app, services };
}

/** Fastify's trustProxy for TRUST_PROXY: a hop count as the function proxy-addr makes of one. */
function trustProxyOption(
  trust: Config['trustProxy'],
): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof trust === 'number' ? (_address, hop) => hop < trust : trust;
}
