import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { IdParams, Success, errorResponses } from '../http/schemas.js';
import type { AccountsService } from './accounts.service.js';
import { ApiKey, ApiKeySummary, CreateApiKeyBody } from './api-keys.schema.js';

/** The account's API keys, for its admins (an agent gets a 403 on every one of these). */
export function apiKeysRoutes(app: FastifyInstance, accounts: AccountsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.post('/api-keys', {
    config: { holdsSecret: true, successStatus: 201 },
    schema: {
      tags: ['API keys'],
      operationId: 'createKey',
      summary: 'Issue an API key (shown only in this response)',
      body: Type.Optional(CreateApiKeyBody),
      response: { 201: ApiKey, ...errorResponses(403, 422) },
    },
    // The body is optional: Fastify validates an absent body against the schema too.
    preValidation: async (req) => {
      req.body ??= {};
    },
    handler: async (req, reply) =>
      reply.code(201).send(await accounts.createApiKeyFor(req.scope, req.body?.name ?? null)),
  });
  r.get('/api-keys', {
    config: { access: 'admin' },
    schema: {
      tags: ['API keys'],
      operationId: 'listKeys',
      summary: "List the account's live API keys (without the keys)",
      response: { 200: Type.Object({ data: Type.Array(ApiKeySummary) }), ...errorResponses(403) },
    },
    handler: (req) => accounts.listApiKeys(req.scope),
  });
  r.delete('/api-keys/:id', {
    schema: {
      tags: ['API keys'],
      operationId: 'revokeKey',
      summary: 'Revoke an API key at once',
      params: IdParams,
      response: { 200: Success, ...errorResponses(403, 404) },
    },
    handler: async (req) => {
      await accounts.revokeApiKey(req.params.id, req.scope.accountId);
      return { success: true as const };
    },
  });
}
