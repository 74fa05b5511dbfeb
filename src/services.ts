// The service graph, built once and wired by hand: app.ts puts the routes on it, server.ts its workers.

import { type FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import { AccountsRepository, type KeyOwner } from './accounts/accounts.repository.js';
import { AccountsService } from './accounts/accounts.service.js';
import { broadcastSendJob } from './broadcasts/broadcast-send.job.js';
import { CannedResponsesRepository } from './canned-responses/canned-responses.repository.js';
import { CannedResponsesService } from './canned-responses/canned-responses.service.js';
import { ProgressAnnouncer } from './broadcasts/broadcast-progress.js';
import { BroadcastStats } from './broadcasts/broadcast-stats.js';
import { BroadcastsRepository } from './broadcasts/broadcasts.repository.js';
import { BroadcastsService } from './broadcasts/broadcasts.service.js';
import type { ChannelProvider, ResolvedProvider } from './channels/channel.js';
import { GraphClient } from './channels/meta/graph-client.js';
import { SandboxProvider } from './channels/sandbox/sandbox.provider.js';
import { WebchatProvider } from './channels/webchat/webchat.provider.js';
import { templateApiOf } from './channels/template-apis.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { BackgroundGate, INTERACTIVE_CHANNEL } from './jobs/background-gate.js';
import { ConnectionsRepository, type ConnectionRow } from './connections/connections.repository.js';
import { ConnectionsService } from './connections/connections.service.js';
import { ConnectionProviderResolver } from './connections/provider-resolver.js';
import { SecretBox } from './connections/secret-box.js';
import { ContactsRepository } from './contacts/contacts.repository.js';
import type { Contact } from './contacts/contacts.schema.js';
import { ContactsService } from './contacts/contacts.service.js';
import { ContactIdentitiesRepository } from './contacts/identities.repository.js';
import { ContactMergeRepository } from './contacts/merge.repository.js';
import { ContactImportsRepository } from './contacts/imports/imports.repository.js';
import { ContactImportsService } from './contacts/imports/imports.service.js';
import { ConversationsRepository } from './conversations/conversations.repository.js';
import { ConversationsService } from './conversations/conversations.service.js';
import type { Db } from './db/database.js';
import { ReadCache } from './db/read-cache.js';
import type { Channel } from './db/schema.js';
import { Transactor } from './db/transactor.js';
import { AppError } from './errors.js';
import { EventFeed } from './events/event-feed.js';
import { EventStreamService, type EventStreamLimits } from './events/event-stream.service.js';
import { EventsRepository } from './events/events.repository.js';
import { Outbox } from './events/outbox.js';
import type { RateLimiter } from './http/rate-limiter.js';
import { contactProfileJob } from './inbound/contact-profile.job.js';
import { inboundWebhookJob } from './inbound/inbound.job.js';
import { InboundWebhooksRepository } from './inbound/inbound.repository.js';
import { InboundWebhooksService } from './inbound/inbound.service.js';
import { ProviderIdAliasesRepository } from './inbound/provider-id-aliases.repository.js';
import { providerFactories } from './provider-factories.js';
import { ClaimKeeper } from './jobs/claim-keeper.js';
import { JobQueue } from './jobs/job-queue.js';
import type { JobHandler } from './jobs/job-runner.js';
import { newLogger, type LogDeps } from './logging.js';
import { MediaLinks } from './media/media-links.js';
import { MediaRepository } from './media/media.repository.js';
import { MediaService } from './media/media.service.js';
import { mediaFetcher, type MediaFetcher } from './messages/media.js';
import { messageSendJob } from './messages/message-send.job.js';
import { MessagesRepository } from './messages/messages.repository.js';
import { MessagesService } from './messages/messages.service.js';
import { SendPipeline } from './messages/send-pipeline.js';
import { Metrics } from './metrics/metrics.js';
import { Notifications } from './realtime/notifications.js';
import { Presence } from './events/presence.js';
import { sandboxStatusJob } from './sandbox/sandbox-status.job.js';
import { SandboxService } from './sandbox/sandbox.service.js';
import { TemplatesRepository, type TemplateRow } from './templates/templates.repository.js';
import { TemplatesService } from './templates/templates.service.js';
import { UsersRepository } from './users/users.repository.js';
import { UsersService } from './users/users.service.js';
import { InvitesRepository } from './users/invites.repository.js';
import { SessionsRepository } from './users/sessions.repository.js';
import { SessionsService } from './users/sessions.service.js';
import { VisitorStreams } from './webchat/visitor-stream.js';
import { VisitorTokens } from './webchat/visitor-token.js';
import { WebchatWakeups } from './webchat/webchat-wakeups.js';
import { WebchatRepository } from './webchat/webchat.repository.js';
import { type WebchatLimits } from './webchat/webchat.routes.js';
import { WebchatService } from './webchat/webchat.service.js';
import { WebhooksRepository } from './webhooks/webhooks.repository.js';
import { WebhooksService } from './webhooks/webhooks.service.js';
import { webhookPurgeJob } from './webhooks/webhook-purge.job.js';

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
  | 'importMaxBytes'
  | 'sessionRateLimitPerMinute'
> &
  /** Believe no X-Forwarded-For when absent; no background gate (0) when absent. */
  Partial<Pick<Config, 'trustProxy' | 'backgroundYieldMs'>>;

export interface AppDeps extends LogDeps {
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
  /** What pg_stat_activity shows for that listening connection (see createDb). */
  eventFeedName?: string;
  /** Keep-alive interval and caps of the live event streams (tests). */
  eventStreams?: EventStreamLimits;
  /** The webchat visitor endpoints' rate limits (tests; defaults otherwise). */
  webchatLimits?: WebchatLimits;
}

/** Every service, built once from the few repositories and adapters each one uses. */
export function buildServices(deps: Omit<AppDeps, 'rateLimiter'>) {
  const { db, clock, config } = deps;
  const log = deps.log ?? newLogger(config.logLevel, deps.logStream);
  const tx = new Transactor(db);
  const outbox = new Outbox(clock);
  const jobs = new JobQueue(clock);
  const usersRepo = new UsersRepository(db);
  // One listening connection per process: the read caches', event streams', presence's, widget's.
  const notifications = new Notifications({
    url: deps.eventFeedUrl ?? null,
    log,
    applicationName: deps.eventFeedName,
  });
  const presence = new Presence({ db, notifications });
  // Interactive sends first: broadcasts yield to API sends in any process (see BackgroundGate).
  const gate = new BackgroundGate({
    yieldMs: config.backgroundYieldMs ?? 0,
    publish: () => sql`SELECT pg_notify(${INTERACTIVE_CHANNEL}, '')`.execute(db),
  });
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
  const sessionsRepo = new SessionsRepository(db);
  const invitesRepo = new InvitesRepository();
  const users = new UsersService({
    tx,
    users: usersRepo,
    invites: invitesRepo,
    sessions: sessionsRepo,
    // Conversations are built further down; a user or team that goes releases theirs.
    assignees: { release: (trx, scope, assignee) => conversations.release(trx, scope, assignee) },
    clock,
    publicUrl: config.publicUrl,
  });
  const sessions = new SessionsService({
    tx,
    users: usersRepo,
    sessions: sessionsRepo,
    invites: invitesRepo,
    clock,
    rateLimitPerMinute: config.sessionRateLimitPerMinute,
  });
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
  const resolver = new ConnectionProviderResolver({
    connections: connectionsRepo,
    secretBox,
    sandbox,
    sandboxEnabled: config.sandboxEnabled,
    factories: providerFactories({
      graph,
      webchat: webchatProvider,
      captionAliases: providerIdAliases,
      tokenRefused: refused,
      clock,
      log,
    }),
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
    log,
  });
  const broadcastProgress = new ProgressAnnouncer({ broadcasts: broadcastsRepo, outbox, clock });
  const broadcastStats = new BroadcastStats({
    broadcasts: broadcastsRepo,
    clock,
    progress: broadcastProgress,
  });
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
  const cannedResponses = new CannedResponsesService({
    cannedResponses: new CannedResponsesRepository(db),
    clock,
  });
  const templates = new TemplatesService({
    tx,
    templates: new TemplatesRepository(db),
    cache: caches.template,
    clock,
    outbox,
    // Templates of an account whose WhatsApp is connected to the Cloud API are Meta's.
    whatsappTemplates: async (accountId) => {
      const row = await connectionsRepo.findByChannel(accountId, 'whatsapp');
      const sealed = row?.secrets;
      if (!row || !sealed || !secretBox) return null;
      return templateApiOf(graph, {
        provider: row.provider,
        settings: row.settings,
        secrets: () => secretBox.open(sealed),
      });
    },
  });
  const conversations = new ConversationsService({
    tx,
    conversations: conversationsRepo,
    messages: messagesRepo,
    users: usersRepo,
    contacts,
    outbox,
    clock,
    presence,
  });
  const media = new MediaService({
    media: new MediaRepository(db),
    tx,
    links: config.secretsKey ? new MediaLinks(config.secretsKey) : null,
    maxUploadBytes: config.mediaMaxBytes,
    clock,
    publicUrl: config.publicUrl,
    allowPrivate: config.allowPrivateTargets,
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
    gate,
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
    uploads: media,
    clock,
  });
  const webhooks = new WebhooksService({
    tx,
    webhooks: new WebhooksRepository(db),
    jobs,
    clock,
    log,
    allowPrivate: config.allowPrivateTargets,
    secretBox,
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
    announcer: broadcastProgress,
    gate,
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
  const eventFeed = new EventFeed({ notifications });
  const eventStreams = new EventStreamService({
    events: new EventsRepository(db),
    feed: eventFeed,
    clock,
    log,
    limits: deps.eventStreams,
    presence,
    // A stream ends (`event: end`) once its key is revoked, its plan loses API access, or it ends.
    credentials: async (credentials) => {
      const ids = (kind: 'key' | 'session') =>
        credentials.filter((c) => c.kind === kind).map((c) => c.id);
      const [keys, sessionsEnded] = await Promise.all([
        accounts.endedKeys(ids('key')),
        sessions.endedSessions(ids('session')),
      ]);
      return new Map([...keys, ...sessionsEnded]);
    },
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
    mediaLink: (accountId, url) => media.publicLink(accountId, url),
    clock,
  });
  const visitorStreams = new VisitorStreams({ webchat, limits: deps.webchatLimits });
  const jobHandlers = [
    sandboxStatusJob(messages),
    broadcastSendJob(broadcasts, new ClaimKeeper({ db, clock, jobs })),
    messageSendJob(messages, messagesRepo),
    inboundWebhookJob(inbound),
    contactProfileJob(inbound),
    webhookPurgeJob(webhooks),
  ] as JobHandler[];
  const contactImports = new ContactImportsService({
    tx,
    contacts: new ContactsRepository(db),
    imports: new ContactImportsRepository(db),
    outbox,
    clock,
    cache: caches.contact,
    maxBytes: config.importMaxBytes,
    onError: (err) => log.error({ err }, 'a contacts import stopped'),
  });
  return {
    accounts,
    cannedResponses,
    contacts,
    contactImports,
    users,
    sessions,
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
    presence,
    eventStreams,
    webchat,
    visitorStreams,
    jobHandlers,
    caches,
    metrics,
    gate,
  };
}
export type Services = ReturnType<typeof buildServices>;

/** Releases what the services hold, once nothing calls them any more (the HTTP server closed). */
export async function closeServices(services: Services): Promise<void> {
  // Webhooks being processed right after their storage finish before Graph's client closes.
  await services.inbound.settled();
  await services.graph.close();
  services.eventFeed.stop();
  services.presence.stop();
  await services.notifications.stop();
}
