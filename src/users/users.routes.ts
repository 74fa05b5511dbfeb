import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, Success, errorResponses } from '../http/schemas.js';
import type { UsersService } from './users.service.js';
import {
  CreatedUser,
  CreateTeamBody,
  CreateUserBody,
  Invite,
  ListQuery,
  Team,
  UpdateTeamBody,
  UpdateUserBody,
  User,
} from './users.schema.js';

export function usersRoutes(app: FastifyInstance, users: UsersService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post('/users', {
    config: { holdsSecret: true, successStatus: 201 },
    schema: {
      tags: ['Users'],
      operationId: 'createUser',
      summary: 'Add a team member, with the invite link that sets their password',
      body: CreateUserBody,
      response: { 201: CreatedUser, ...errorResponses(409, 422) },
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

  r.patch('/users/:id', {
    schema: {
      tags: ['Users'],
      operationId: 'updateUser',
      summary: 'Rename a team member or change their role (the last admin stays one: 409)',
      params: IdParams,
      body: UpdateUserBody,
      response: { 200: User, ...errorResponses(404, 409, 422) },
    },
    handler: (req) => users.updateUser(req.scope, req.params.id, req.body),
  });
  r.delete('/users/:id', {
    schema: {
      tags: ['Users'],
      operationId: 'deleteUser',
      summary:
        'Remove a team member: their sessions end, their conversations are unassigned (the last admin: 409)',
      params: IdParams,
      response: { 200: Success, ...errorResponses(404, 409) },
    },
    handler: (req) => users.deleteUser(req.scope, req.params.id),
  });
  r.post('/users/:id/invite', {
    config: { holdsSecret: true },
    schema: {
      tags: ['Users'],
      operationId: 'inviteUser',
      summary: 'Issue a new invite link (the earlier one stops working)',
      params: IdParams,
      response: { 200: Invite, ...errorResponses(404) },
    },
    handler: (req) => users.reinvite(req.scope, req.params.id),
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
  r.patch('/teams/:id', {
    schema: {
      tags: ['Teams'],
      operationId: 'updateTeam',
      summary: 'Rename a team or set its members',
      params: IdParams,
      body: UpdateTeamBody,
      response: { 200: Team, ...errorResponses(404, 422) },
    },
    handler: (req) => users.updateTeam(req.scope, req.params.id, req.body),
  });
  r.delete('/teams/:id', {
    schema: {
      tags: ['Teams'],
      operationId: 'deleteTeam',
      summary: 'Delete a team (its conversations are unassigned)',
      params: IdParams,
      response: { 200: Success, ...errorResponses(404) },
    },
    handler: (req) => users.deleteTeam(req.scope, req.params.id),
  });
}
