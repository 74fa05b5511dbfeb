import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, errorResponses } from '../http/schemas.js';
import type { BroadcastsService } from './broadcasts.service.js';
import {
  Broadcast,
  BroadcastPreview,
  BroadcastRecipient,
  CreateBroadcastBody,
  ListBroadcastsQuery,
  ListRecipientsQuery,
  PreviewBroadcastBody,
} from './broadcasts.schema.js';

export function broadcastsRoutes(app: FastifyInstance, broadcasts: BroadcastsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Broadcasts'];

  r.post('/broadcasts', {
    config: { successStatus: 201 },
    schema: {
      tags,
      operationId: 'createBroadcast',
      summary: 'Send a message to an audience, now or at scheduled_at',
      body: CreateBroadcastBody,
      response: { 201: Broadcast, ...errorResponses(404, 422) },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await broadcasts.create(req.scope, req.body)),
  });
  r.post('/broadcasts/preview', {
    schema: {
      tags,
      operationId: 'previewBroadcast',
      summary: 'Count the contacts an audience matches now, as a broadcast would',
      body: PreviewBroadcastBody,
      response: { 200: BroadcastPreview, ...errorResponses(404, 422) },
    },
    handler: (req) => broadcasts.preview(req.scope, req.body),
  });
  r.get('/broadcasts', {
    schema: {
      tags,
      operationId: 'listBroadcasts',
      summary: 'List broadcasts, newest first',
      querystring: ListBroadcastsQuery,
      response: { 200: Page(Broadcast), ...errorResponses(422) },
    },
    handler: (req) => broadcasts.list(req.scope, req.query, pageRequest(req.query)),
  });
  r.get('/broadcasts/:id', {
    schema: {
      tags,
      operationId: 'getBroadcast',
      summary: 'Get a broadcast with its live stats',
      params: IdParams,
      response: { 200: Broadcast, ...errorResponses(404) },
    },
    handler: (req) => broadcasts.get(req.scope, req.params.id),
  });
  r.get('/broadcasts/:id/recipients', {
    schema: {
      tags,
      operationId: 'listBroadcastRecipients',
      summary: "List a broadcast's recipients in the order they were processed",
      params: IdParams,
      querystring: ListRecipientsQuery,
      response: { 200: Page(BroadcastRecipient), ...errorResponses(404, 422) },
    },
    handler: (req) =>
      broadcasts.recipients(req.scope, req.params.id, req.query, pageRequest(req.query)),
  });
  r.post('/broadcasts/:id/cancel', {
    schema: {
      tags,
      operationId: 'cancelBroadcast',
      summary: 'Return a scheduled broadcast to draft',
      params: IdParams,
      response: { 200: Broadcast, ...errorResponses(404, 409) },
    },
    handler: (req) => broadcasts.cancel(req.scope, req.params.id),
  });
}
