import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { InboundWebhooksService } from './inbound.service.js';

/**
 * The request body exactly as it arrived. A Buffer would be walked byte by byte by the input
 * guard; the private field keeps the bytes out of its sight (the signature covers them).
 */
export class RawBody {
  readonly #bytes: Buffer;
  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }
  get bytes(): Buffer {
    return this.#bytes;
  }
}

const Params = Type.Object({ connection_id: Type.String() });
const VerificationQuery = Type.Object({
  'hub.mode': Type.Optional(Type.String()),
  'hub.verify_token': Type.Optional(Type.String()),
  'hub.challenge': Type.Optional(Type.String()),
});

/**
 * `/channels/{connection_id}/webhook`, outside /v1 and without an API key: Meta's handshake and
 * signed deliveries. Register it as its own plugin: it takes every body as raw bytes.
 */
export async function inboundWebhookRoutes(
  app: FastifyInstance,
  inbound: InboundWebhooksService,
): Promise<void> {
  // The signature covers the bytes as sent, so nothing may parse (and re-serialise) them first.
  // The server's body limit (1 MiB) still applies.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) =>
    done(null, new RawBody(body as Buffer)),
  );
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get('/channels/:connection_id/webhook', {
    schema: { hide: true, params: Params, querystring: VerificationQuery },
    handler: async (req, reply) => {
      const challenge = await inbound.verify(req.params.connection_id, req.query);
      return reply.type('text/plain; charset=utf-8').send(challenge);
    },
  });

  r.post('/channels/:connection_id/webhook', {
    schema: { hide: true, params: Params },
    handler: async (req, reply) => {
      const body = req.body instanceof RawBody ? req.body.bytes : Buffer.alloc(0);
      const signature = req.headers['x-hub-signature-256'];
      await inbound.accept(
        req.params.connection_id,
        body,
        typeof signature === 'string' ? signature : undefined,
      );
      return reply.code(200).send({ success: true });
    },
  });
}
