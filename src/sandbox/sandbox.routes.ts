import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { IdParams, errorResponses } from '../http/schemas.js';
import { Message, SandboxInboundBody, SandboxStatusBody } from '../messages/messages.schema.js';
import { ReviewTemplateBody, Template } from '../templates/templates.schema.js';
import type { SandboxService } from './sandbox.service.js';

/** The sandbox's controls (see SandboxService); registered while SANDBOX_ENABLED. */
export function sandboxRoutes(app: FastifyInstance, sandbox: SandboxService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Sandbox'];

  r.post('/sandbox/inbound', {
    config: { successStatus: 201 },
    schema: {
      tags,
      operationId: 'sandboxInbound',
      summary: 'Simulate an inbound message from a contact',
      body: SandboxInboundBody,
      response: { 201: Message, ...errorResponses(404, 422) },
    },
    handler: async (req, reply) => reply.code(201).send(await sandbox.inbound(req.scope, req.body)),
  });
  r.post('/sandbox/messages/:id/status', {
    schema: {
      tags,
      operationId: 'sandboxMessageStatus',
      summary: 'Simulate a delivery report for an outbound message',
      params: IdParams,
      body: SandboxStatusBody,
      response: { 200: Message, ...errorResponses(404, 422) },
    },
    handler: (req) => sandbox.setStatus(req.scope, req.params.id, req.body),
  });
  r.post('/sandbox/templates/:id/review', {
    schema: {
      tags,
      operationId: 'sandboxReviewTemplate',
      summary: "Simulate the provider's template review",
      params: IdParams,
      body: ReviewTemplateBody,
      response: { 200: Template, ...errorResponses(404, 422) },
    },
    handler: (req) => sandbox.review(req.scope, req.params.id, req.body),
  });
}
