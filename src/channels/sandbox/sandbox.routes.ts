import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { IdParams, errorResponses } from '../../http/schemas.js';
import { ValidationError } from '../../errors.js';
import { Message, SandboxInboundBody, SandboxStatusBody } from '../../messages/messages.schema.js';
import type { MessagesService } from '../../messages/messages.service.js';
import { ReviewTemplateBody, Template } from '../../templates/templates.schema.js';
import type { TemplatesService } from '../../templates/templates.service.js';
import type { ConnectionsService } from '../connections/connections.service.js';
import type { SandboxProvider } from './sandbox.provider.js';

/**
 * The sandbox's controls: what a real provider would do through its callbacks and review desk.
 * Only on channels that use the sandbox: on a channel connected to a real provider they are a
 * 422, so that nothing simulated mixes with what the provider reports.
 */
export function sandboxRoutes(
  app: FastifyInstance,
  deps: {
    sandbox: SandboxProvider;
    messages: MessagesService;
    templates: TemplatesService;
    connections: ConnectionsService;
  },
): void {
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
    handler: async (req, reply) => {
      if ((req.body.phone === undefined) === (req.body.contact_id === undefined)) {
        throw new ValidationError('phone', 'give exactly one of phone and contact_id');
      }
      await deps.connections.requireSandbox(req.scope, { channel: req.body.channel });
      const inbound = deps.sandbox.parseInbound(req.body);
      return reply.code(201).send(await deps.messages.receive(req.scope, inbound));
    },
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
    handler: async (req) => {
      await deps.connections.requireSandbox(req.scope, { messageId: req.params.id });
      return deps.messages.applyStatus(req.scope, {
        messageId: req.params.id,
        status: req.body.status,
        reason: req.body.reason,
      });
    },
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
    handler: (req) => deps.templates.review(req.scope, req.params.id, req.body.status),
  });
}
