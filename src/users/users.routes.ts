import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, errorResponses } from '../http/schemas.js';
import type { UsersService } from './users.service.js';
import { CreateTeamBody, CreateUserBody, ListQuery, Team, User } from './users.schema.js';

export function usersRoutes(app: FastifyInstance, users: UsersService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post('/users', {
    config: { successStatus: 201 },
    schema: {
      tags: ['Users'],
      operationId: 'createUser',
      summary: 'Add a team member',
      body: CreateUserBody,
      response: { 201: User, ...errorResponses(409, 422) },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await users.createUser(req.scope, req.body)),
  });
  r.get('/users', {
    schema: {
      tags: ['Users'],
      operationId: 'listUsers',
      summary: 'List team members',
      querystring: ListQuery,
      response: { 200: Page(User), ...errorResponses(422) },
    },
    handler: (req) => users.listUsers(req.scope, pageRequest(req.query)),
  });
  r.get('/users/:id', {
    schema: {
      tags: ['Users'],
      operationId: 'getUser',
      summary: 'Get a team member',
      params: IdParams,
      response: { 200: User, ...errorResponses(404) },
    },
    handler: (req) => users.getUser(req.scope, req.params.id),
  });

  r.post('/teams', {
    config: { successStatus: 201 },
    schema: {
      tags: ['Teams'],
      operationId: 'createTeam',
      summary: 'Create a team',
      body: CreateTeamBody,
      response: { 201: Team, ...errorResponses(404, 422) },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await users.createTeam(req.scope, req.body)),
  });
  r.get('/teams', {
    schema: {
      tags: ['Teams'],
      operationId: 'listTeams',
      summary: 'List teams',
      querystring: ListQuery,
      response: { 200: Page(Team), ...errorResponses(422) },
    },
    handler: (req) => users.listTeams(req.scope, pageRequest(req.query)),
  });
  r.get('/teams/:id', {
    schema: {
      tags: ['Teams'],
      operationId: 'getTeam',
      summary: 'Get a team',
      params: IdParams,
      response: { 200: Team, ...errorResponses(404) },
    },
    handler: (req) => users.getTeam(req.scope, req.params.id),
  });
}
