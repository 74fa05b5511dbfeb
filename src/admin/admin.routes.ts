import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AccountsService } from '../accounts/accounts.service.js';
import { ApiKey } from '../accounts/api-keys.schema.js';
import type { DeadJobs } from '../jobs/dead-jobs.js';
import { pageRequest } from '../http/pagination.js';
import type { UsersService } from '../users/users.service.js';
import { Unauthorized } from '../errors.js';
import { ErrorRef, IdParams, PageQuery, Success } from '../http/schemas.js';
import {
  Account,
  AccountKeys,
  AccountPage,
  AdminInvite,
  DeadJobList,
  DeadJobsQuery,
  InviteBody,
  Plan,
  RateLimit,
  RetriedJob,
} from './admin.schema.js';

const adminErrors = { 401: ErrorRef, 404: ErrorRef, 422: ErrorRef };

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Accounts, API keys, invites and dead jobs, for the operator; only mounted when ADMIN_TOKEN is set. */
export function adminRoutes(
  app: FastifyInstance,
  deps: {
    accounts: AccountsService;
    users: UsersService;
    deadJobs: DeadJobs;
    adminToken: string;
  },
): void {
  const expected = digest(deps.adminToken);
  app.addHook('onRequest', async (request) => {
    const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
    // Comparing digests keeps the check constant-time whatever the token's length.
    if (!match || !timingSafeEqual(digest(match[1]!), expected))
      throw new Unauthorized('admin token missing or invalid');
  });

  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Admin'];
  const security = [{ adminToken: [] }];

  r.post('/accounts', {
    schema: {
      operationId: 'createAccount',
      tags,
      security,
      summary: 'Create an account',
      body: Type.Object(
        {
          name: Type.String({ minLength: 1, maxLength: 200 }),
          plan: Plan,
          rate_limit_per_minute: Type.Optional(RateLimit),
        },
        { additionalProperties: false },
      ),
      response: { 201: Account, ...adminErrors },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await deps.accounts.createAccount(req.body)),
  });

  r.get('/accounts', {
    schema: {
      operationId: 'listAccounts',
      tags,
      security,
      summary: 'List every account, newest first',
      querystring: Type.Object(PageQuery, { additionalProperties: false }),
      response: { 200: AccountPage, ...adminErrors },
    },
    handler: (req) => deps.accounts.listAccounts(pageRequest(req.query)),
  });

  r.get('/accounts/:id', {
    schema: {
      operationId: 'getAccount',
      tags,
      security,
      summary: 'Get an account',
      params: IdParams,
      response: { 200: Account, ...adminErrors },
    },
    handler: (req) => deps.accounts.getAccount(req.params.id),
  });

  r.patch('/accounts/:id', {
    schema: {
      operationId: 'updateAccount',
      tags,
      security,
      summary:
        "Change an account's name, plan or rate limit (null returns it to the plan's figure)",
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
          plan: Type.Optional(Plan),
          rate_limit_per_minute: Type.Optional(RateLimit),
        },
        { additionalProperties: false },
      ),
      response: { 200: Account, ...adminErrors },
    },
    handler: (req) => deps.accounts.updateAccount(req.params.id, req.body),
  });

  r.post('/accounts/:id/api-keys', {
    schema: {
      operationId: 'createApiKey',
      tags,
      security,
      summary: 'Issue an API key (shown only in this response)',
      params: IdParams,
      body: Type.Optional(
        Type.Object(
          { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) },
          { additionalProperties: false },
        ),
      ),
      response: { 201: ApiKey, ...adminErrors },
    },
    // The body is optional: Fastify validates an absent body against the schema too, so it becomes {}.
    preValidation: async (req) => {
      req.body ??= {};
    },
    handler: async (req, reply) =>
      reply.code(201).send(await deps.accounts.createApiKey(req.params.id, req.body?.name ?? null)),
  });

  r.get('/accounts/:id/api-keys', {
    schema: {
      operationId: 'listAccountApiKeys',
      tags,
      security,
      summary: "List an account's live API keys (without the keys)",
      params: IdParams,
      response: { 200: AccountKeys, ...adminErrors },
    },
    handler: (req) => deps.accounts.listApiKeysOf(req.params.id),
  });

  r.post('/accounts/:id/invites', {
    schema: {
      operationId: 'inviteToAccount',
      tags,
      security,
      summary:
        'An invite link for a user of the account (a new user, or a new link for the one with that email)',
      params: IdParams,
      body: InviteBody,
      response: { 201: AdminInvite, ...adminErrors },
    },
    handler: async (req, reply) => {
      await deps.accounts.getAccount(req.params.id);
      return reply.code(201).send(await deps.users.inviteByEmail(req.params.id, req.body));
    },
  });

  r.delete('/api-keys/:id', {
    schema: {
      operationId: 'revokeApiKey',
      tags,
      security,
      summary: 'Revoke an API key at once',
      params: IdParams,
      response: { 200: Success, ...adminErrors },
    },
    handler: async (req) => {
      await deps.accounts.revokeApiKey(req.params.id);
      return { success: true as const };
    },
  });

  r.get('/jobs/dead', {
    schema: {
      operationId: 'listDeadJobs',
      tags,
      security,
      summary: 'List jobs whose retries ran out, newest first, with their last error',
      querystring: DeadJobsQuery,
      response: { 200: DeadJobList, ...adminErrors },
    },
    handler: async (req) => ({
      data: await deps.deadJobs.list({
        accountId: req.query.account_id,
        limit: req.query.limit ?? 100,
      }),
    }),
  });

  r.post('/jobs/:id/retry', {
    schema: {
      operationId: 'retryDeadJob',
      tags,
      security,
      summary: 'Put a dead job back in the queue, due now, with a fresh retry schedule',
      params: IdParams,
      response: { 200: RetriedJob, ...adminErrors },
    },
    handler: (req) => deps.deadJobs.retry(req.params.id),
  });
}
