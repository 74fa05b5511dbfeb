import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, Success, errorResponses } from '../http/schemas.js';
import type { CannedResponsesService } from './canned-responses.service.js';
import {
  CannedResponse,
  CreateCannedResponseBody,
  ListCannedResponsesQuery,
  UpdateCannedResponseBody,
} from './canned-responses.schema.js';

export function cannedResponsesRoutes(
  app: FastifyInstance,
  cannedResponses: CannedResponsesService,
): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Canned responses'];

  r.post('/canned-responses', {
    config: { access: 'agent', successStatus: 201 },
    schema: {
      tags,
      operationId: 'createCannedResponse',
      summary: 'Add a canned response (a taken shortcut is a 409)',
      body: CreateCannedResponseBody,
      response: { 201: CannedResponse, ...errorResponses(409, 422) },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await cannedResponses.create(req.scope, req.body)),
  });
  r.get('/canned-responses', {
    schema: {
      tags,
      operationId: 'listCannedResponses',
      summary: 'List canned responses by shortcut; q finds them by shortcut or content',
      querystring: ListCannedResponsesQuery,
      response: { 200: Page(CannedResponse), ...errorResponses(422) },
    },
    handler: (req) => cannedResponses.list(req.scope, req.query.q, pageRequest(req.query)),
  });
  r.get('/canned-responses/:id', {
    schema: {
      tags,
      operationId: 'getCannedResponse',
      summary: 'Get a canned response',
      params: IdParams,
      response: { 200: CannedResponse, ...errorResponses(404) },
    },
    handler: (req) => cannedResponses.get(req.scope, req.params.id),
  });
  r.patch('/canned-responses/:id', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'updateCannedResponse',
      summary: 'Change the shortcut or the content (a taken shortcut is a 409)',
      params: IdParams,
      body: UpdateCannedResponseBody,
      response: { 200: CannedResponse, ...errorResponses(404, 409, 422) },
    },
    handler: (req) => cannedResponses.update(req.scope, req.params.id, req.body),
  });
  r.delete('/canned-responses/:id', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'deleteCannedResponse',
      summary: 'Delete a canned response',
      params: IdParams,
      response: { 200: Success, ...errorResponses(404) },
    },
    handler: (req) => cannedResponses.delete(req.scope, req.params.id),
  });
}
