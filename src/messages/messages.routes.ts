import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { errorResponses } from '../http/schemas.js';
import type { MessagesService } from './messages.service.js';
import { Message, SendMessageBody, SendMessageUnion } from './messages.schema.js';

export function messagesRoutes(app: FastifyInstance, messages: MessagesService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.post('/messages/send', {
    config: {
      access: 'agent',
      successStatus: 201,
      // Documented as one shape per `type` (validation is unchanged).
      swaggerTransform: ({ schema, url }) => ({
        schema: { ...schema, body: SendMessageUnion },
        url,
      }),
    },
    schema: {
      tags: ['Messages'],
      operationId: 'sendMessage',
      summary: 'Send a message (creates the conversation when there is none)',
      body: SendMessageBody,
      response: { 201: Message, ...errorResponses(404, 422, 503) },
    },
    handler: async (req, reply) => reply.code(201).send(await messages.send(req.scope, req.body)),
  });
}
