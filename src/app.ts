import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import { apiKeysRoutes } from './accounts/api-keys.routes.js';
import { adminRoutes } from './admin/admin.routes.js';
import { DeadJobs } from './jobs/dead-jobs.js';
import { appRoute } from './app-shell/app.route.js';
import { broadcastsRoutes } from './broadcasts/broadcasts.routes.js';
import { cannedResponsesRoutes } from './canned-responses/canned-responses.routes.js';
import type { Config } from './config.js';
import { connectionsRoutes } from './connections/connections.routes.js';
import { contactsRoutes } from './contacts/contacts.routes.js';
import { contactCsvRoutes } from './contacts/imports/imports.routes.js';
import { conversationsRoutes } from './conversations/conversations.routes.js';
import { eventsRoutes } from './events/events.routes.js';
import {
  answerClientError,
  answerRouterError,
  databaseUnavailable,
  installErrorHandlers,
} from './http/error-handler.js';
import { installAuth } from './http/auth.js';
import { installBodyStallGuard, STALL_LIMITS, type StallLimits } from './http/body-stall.js';
import { DOCS_PAGE } from './http/docs-page.js';
import { installIdempotency, type ResponseSealer } from './http/idempotency.js';
import { SecretBox } from './connections/secret-box.js';
import { installInputGuard } from './http/input-guard.js';
import { loggerOptions } from './logging.js';
import { completeOpenApi } from './openapi-document.js';
import { ErrorBody, NoQuery } from './http/schemas.js';
import { validatorCompiler } from './http/validation.js';
import { inboundWebhookRoutes } from './inbound/inbound.routes.js';
import { mediaLinkRoutes, mediaRoutes } from './media/media.routes.js';
import { messagesRoutes } from './messages/messages.routes.js';
import { installRequestMetrics, metricsRoutes } from './metrics/metrics.routes.js';
import { sandboxRoutes } from './sandbox/sandbox.routes.js';
import { buildServices, closeServices, type AppDeps, type Services } from './services.js';
import { templatesRoutes } from './templates/templates.routes.js';
import { sessionRoutes } from './users/session.routes.js';
import { usersRoutes } from './users/users.routes.js';
import { webchatRoutes } from './webchat/webchat.routes.js';
import { widgetRoute } from './webchat/widget.route.js';
import { webhooksRoutes } from './webhooks/webhooks.routes.js';

export const BODY_LIMIT = 1024 * 1024;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export async function buildApp(
  deps: AppDeps & {
    /** When a request body that stops arriving is ended with 408 (tests; DESIGN's otherwise). */
    bodyStall?: StallLimits;
  },
): Promise<{ app: FastifyInstance; services: Services }> {
  const services = buildServices(deps);
  const app = Fastify({
    logger: { ...loggerOptions(deps.config.logLevel), stream: deps.logStream },
    bodyLimit: BODY_LIMIT,
    trustProxy: trustProxyOption(deps.config.trustProxy ?? false),
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: { customOptions: {} },
    // Ids are far shorter; a longer one still reaches its route, so that a missing key is a 401
    // first and the id a 404 after, with the headers every answer carries.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 2048 },
    frameworkErrors: answerRouterError,
    clientErrorHandler: answerClientError,
    // A missing Host is refused in the error envelope by installErrorHandlers, not by Node.
    http: { requireHostHeader: false },
    // No cap on a whole request: a large import on a slow but steady link must arrive. Bodies are
    // bounded by their pace instead (installBodyStallGuard), headers by Node's headersTimeout
    // (60 s), idle keep-alive connections by keepAliveTimeout.
    requestTimeout: 0,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.addHook('onClose', () => closeServices(services));
  // Open event and widget streams would keep close() waiting forever: they end first (clients
  // reconnect).
  app.addHook('preClose', (done) => {
    services.eventStreams.closeAll();
    services.visitorStreams.closeAll();
    done();
  });
  // First of all hooks, so that every refusal (a missing Host included) carries it.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    done();
  });
  installErrorHandlers(app);
  installInputGuard(app);
  installBodyStallGuard(app, deps.bodyStall ?? STALL_LIMITS);
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
    transformObject: (documents) =>
      completeOpenApi(structuredClone('openapiObject' in documents ? documents.openapiObject : {})),
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  });
  await app.register(swaggerUi, DOCS_PAGE);

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

  app.decorate('routeAccess', []);
  await app.register(
    async (v1) => {
      // A typo in a query parameter must not pass silently, on routes that take none too.
      v1.addHook('onRoute', (route) => {
        route.schema ??= {};
        route.schema.querystring ??= NoQuery;
      });
      installAuth(v1, {
        authenticators: {
          apiKey: (key) => services.accounts.keyPrincipal(key),
          session: (token) => services.sessions.principal(token),
        },
        rateLimiter: deps.rateLimiter,
        routeAccess: app.routeAccess,
      });
      installIdempotency(v1, {
        db: deps.db,
        clock: deps.clock,
        sealer: responseSealer(deps.config.secretsKey),
      });
      sessionRoutes(v1, services.sessions, {
        secureCookie: deps.config.publicUrl.startsWith('https:'),
      });
      apiKeysRoutes(v1, services.accounts);
      contactsRoutes(v1, services.contacts);
      contactCsvRoutes(v1, services.contactImports);
      usersRoutes(v1, services.users);
      templatesRoutes(v1, services.templates);
      conversationsRoutes(v1, services.conversations);
      cannedResponsesRoutes(v1, services.cannedResponses);
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

  // Signed media links (what providers fetch): outside /v1, no API key; the signature is the credential.
  await app.register(async (links) => mediaLinkRoutes(links, services.media));

  // Providers' webhooks: outside /v1, no API key; the signature is the credential.
  await app.register(async (hooks) => inboundWebhookRoutes(hooks, services.inbound));

  appRoute(app);

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
      async (admin) =>
        adminRoutes(admin, {
          accounts: services.accounts,
          users: services.users,
          deadJobs: new DeadJobs({ db: deps.db, clock: deps.clock }),
          adminToken,
        }),
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

/** Replay records of answers that hold a secret are sealed under SECRETS_KEY (none without it). */
function responseSealer(key: Buffer | null): ResponseSealer | null {
  if (!key) return null;
  const box = new SecretBox(key);
  return {
    seal: (text) => box.seal({ body: text }).toString('base64'),
    open: (sealed) => box.open(Buffer.from(sealed, 'base64')).body!,
  };
}
