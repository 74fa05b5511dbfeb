import type { FastifyInstance, FastifySchemaCompiler } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ErrorObject } from 'ajv';
import { Page, Success, errorResponses } from '../http/schemas.js';
import { validatorCompiler } from '../http/validation.js';
import type { ConnectionsService } from './connections.service.js';
import {
  ChannelParams,
  ConnectBody,
  Connection,
  InstagramConnectBody,
  MessengerConnectBody,
  WebchatConnectBody,
  WhatsAppConnectBody,
} from './connections.schema.js';

const BODY_OF_PROVIDER = {
  whatsapp_cloud: WhatsAppConnectBody,
  messenger: MessengerConnectBody,
  instagram: InstagramConnectBody,
  webchat: WebchatConnectBody,
};

/**
 * The PUT body is one of four shapes told apart by `provider`. Each body is checked against its
 * provider's shape alone, so that a client reads `page_id: unknown field` rather than every
 * other shape's missing fields (what a plain `anyOf` reports); the document shows the union.
 */
const connectValidatorCompiler: FastifySchemaCompiler<object> = (route) => {
  if (route.httpPart !== 'body') return validatorCompiler(route);
  const shapes = new Map(
    Object.entries(BODY_OF_PROVIDER).map(([provider, schema]) => [
      provider,
      validatorCompiler({ ...route, schema }),
    ]),
  );
  const refuse = (error: Omit<ErrorObject, 'schemaPath'>) => {
    validate.errors = [{ ...error, schemaPath: '#/anyOf' }];
    return false;
  };
  const validate: ((data: unknown) => boolean) & { errors?: unknown } = (data) => {
    if (data === null || typeof data !== 'object' || Array.isArray(data))
      return refuse({ keyword: 'type', instancePath: '', params: {}, message: 'must be object' });
    const provider = (data as { provider?: unknown }).provider;
    if (provider === undefined)
      return refuse({
        keyword: 'required',
        instancePath: '',
        params: { missingProperty: 'provider' },
      });
    const shape = typeof provider === 'string' ? shapes.get(provider) : undefined;
    if (!shape)
      return refuse({
        keyword: 'enum',
        instancePath: '/provider',
        params: { allowedValues: [...shapes.keys()] },
      });
    // Ajv compiles these schemas to synchronous checks: a boolean.
    const valid = shape(data) === true;
    validate.errors = valid ? null : (shape as { errors?: unknown }).errors;
    return valid;
  };
  return validate as ReturnType<FastifySchemaCompiler<object>>;
};

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
    validatorCompiler: connectValidatorCompiler,
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
