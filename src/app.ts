import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { sql } from 'kysely';
import { AccountsRepository } from './accounts/accounts.repository.js';
import { AccountsService } from './accounts/accounts.service.js';
import { adminRoutes } from './admin/admin.routes.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import { ContactsRepository } from './contacts/contacts.repository.js';
import { contactsRoutes } from './contacts/contacts.routes.js';
import { ContactsService } from './contacts/contacts.service.js';
import type { Db } from './db/database.js';
import { Transactor } from './db/transactor.js';
import { Outbox } from './events/outbox.js';
import { installApiAuth } from './http/auth.js';
import { installErrorHandlers } from './http/error-handler.js';
import { installIdempotency } from './http/idempotency.js';
import type { RateLimiter } from './http/rate-limiter.js';
import { ErrorBody } from './http/schemas.js';
import { validatorCompiler } from './http/validation.js';

export const BODY_LIMIT = 1024 * 1024;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface AppDeps {
  config: Pick<Config, 'adminToken' | 'logLevel'>;
  db: Db;
  rateLimiter: RateLimiter;
  clock: Clock;
}

export function buildServices(deps: AppDeps) {
  const { db, clock } = deps;
  const tx = new Transactor(db);
  const outbox = new Outbox(clock);
  const accounts = new AccountsService({ db, accounts: new AccountsRepository(db), clock });
  const contacts = new ContactsService({ tx, contacts: new ContactsRepository(db), outbox, clock });
  return { accounts, contacts };
}
export type Services = ReturnType<typeof buildServices>;

export async function buildApp(deps: AppDeps): Promise<{ app: FastifyInstance; services: Services }> {
  const services = buildServices(deps);
  const app = Fastify({
    logger: {
      level: deps.config.logLevel,
      redact: { paths: ['req.headers.authorization', 'req.headers["idempotency-key"]'], remove: true },
    },
    bodyLimit: BODY_LIMIT,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: { customOptions: {} },
    routerOptions: { ignoreTrailingSlash: true },
  });
  app.setValidatorCompiler(validatorCompiler);
  installErrorHandlers(app);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
  });
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
      servers: [{ url: 'http://127.0.0.1:3000', description: 'Local service' }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <key>`.' },
          adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token set in ADMIN_TOKEN.' },
        },
      },
      security: [{ apiKey: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true });

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    try {
      await sql`SELECT 1`.execute(deps.db);
      return { status: 'ok' };
    } catch {
      return reply.code(503).send({ error: { code: 'unavailable', message: 'database unreachable' } });
    }
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  await app.register(
    async (v1) => {
      installApiAuth(v1, { accounts: services.accounts, rateLimiter: deps.rateLimiter });
      installIdempotency(v1, { db: deps.db, clock: deps.clock });
      contactsRoutes(v1, services.contacts);
    },
    { prefix: '/v1' },
  );

  const adminToken = deps.config.adminToken;
  if (adminToken) {
    await app.register(async (admin) => adminRoutes(admin, { accounts: services.accounts, adminToken }), {
      prefix: '/admin',
    });
  }
  return { app, services };
}
