import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, Success, errorResponses } from '../http/schemas.js';
import type { TemplatesService } from './templates.service.js';
import {
  CreateTemplateBody,
  ListTemplatesQuery,
  SyncTemplatesResult,
  Template,
} from './templates.schema.js';

export function templatesRoutes(app: FastifyInstance, templates: TemplatesService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Templates'];

  r.post('/templates', {
    config: { successStatus: 201 },
    schema: {
      tags,
      operationId: 'createTemplate',
      summary: 'Submit a message template (starts pending)',
      body: CreateTemplateBody,
      response: { 201: Template, ...errorResponses(409, 422) },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await templates.create(req.scope, req.body)),
  });
  r.post('/templates/sync', {
    schema: {
      tags,
      operationId: 'syncTemplates',
      summary: "Import the templates Meta holds for the account's WhatsApp Business Account",
      description:
        'Only on an account whose whatsapp channel is connected to whatsapp_cloud (else 422). ' +
        "Templates are matched by Meta id, else by name; their status, body and category become Meta's.",
      response: { 200: SyncTemplatesResult, ...errorResponses(422, 503) },
    },
    handler: (req) => templates.sync(req.scope),
  });
  r.get('/templates', {
    schema: {
      tags,
      operationId: 'listTemplates',
      summary: 'List templates, newest first',
      querystring: ListTemplatesQuery,
      response: { 200: Page(Template), ...errorResponses(422) },
    },
    handler: (req) => templates.list(req.scope, pageRequest(req.query), req.query.status),
  });
  r.get('/templates/:id', {
    schema: {
      tags,
      operationId: 'getTemplate',
      summary: 'Get a template',
      params: IdParams,
      response: { 200: Template, ...errorResponses(404) },
    },
    handler: (req) => templates.get(req.scope, req.params.id),
  });
  r.delete('/templates/:id', {
    schema: {
      tags,
      operationId: 'deleteTemplate',
      summary: 'Delete a template (its name is free again)',
      description:
        "One of Meta's (on a WhatsApp Cloud connection) is deleted at Meta first: Meta's refusal is a 422 quoting it, Meta unreachable or throttling a 503, and either way nothing is deleted here.",
      params: IdParams,
      response: { 200: Success, ...errorResponses(404, 422, 503) },
    },
    handler: (req) => templates.delete(req.scope, req.params.id),
  });
}
