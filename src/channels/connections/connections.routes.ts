import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Page, Success, errorResponses } from '../../http/schemas.js';
import type { ConnectionsService } from './connections.service.js';
import { ChannelParams, ConnectBody, Connection } from './connections.schema.js';

export function connectionsRoutes(app: FastifyInstance, connections: ConnectionsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Channels'];

  r.get('/channels', {
    schema: {
      tags,
      operationId: 'listChannels',
      summary: 'Every channel and its connection: whatsapp, instagram, messenger, webchat',
      response: { 200: Page(Connection), ...errorResponses() },
    },
    handler: (req) => connections.list(req.scope),
  });
  r.get('/channels/:channel', {
    schema: {
      tags,
      operationId: 'getChannel',
      summary: "A channel's connection (status `not_connected` when there is none)",
      params: ChannelParams,
      response: { 200: Connection, ...errorResponses(422) },
    },
    handler: (req) => connections.get(req.scope, req.params.channel),
  });
  r.put('/channels/:channel', {
    schema: {
      tags,
      operationId: 'connectChannel',
      summary: 'Connect a channel, or replace its credentials (checked with the provider first)',
      description:
        'Secrets (`access_token`, `page_access_token`, `app_secret`) are stored encrypted and never returned. Paste `webhook_url` and `verify_token` into the Meta app dashboard.',
      params: ChannelParams,
      body: ConnectBody,
      response: { 200: Connection, ...errorResponses(422, 503) },
    },
    handler: (req) => connections.connect(req.scope, req.params.channel, req.body),
  });
  r.delete('/channels/:channel', {
    schema: {
      tags,
      operationId: 'disconnectChannel',
      summary: 'Disconnect a channel: back to the sandbox (or unconnected without it)',
      params: ChannelParams,
      response: { 200: Success, ...errorResponses(404, 422) },
    },
    handler: (req) => connections.disconnect(req.scope, req.params.channel),
  });
}
