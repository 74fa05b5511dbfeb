import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { errorResponses, IdParams } from '../http/schemas.js';
import type { MediaService } from './media.service.js';

/** `GET /v1/media/{id}`: a kept file with its original content type (register under /v1). */
export function mediaRoutes(app: FastifyInstance, media: MediaService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get('/media/:id', {
    schema: {
      tags: ['Messages'],
      operationId: 'getMedia',
      summary: "A file received with an inbound message (the message's media_url)",
      params: IdParams,
      response: {
        200: {
          description: 'The file, with the content type it arrived with.',
          content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
        },
        ...errorResponses(404),
      },
    },
    handler: async (req, reply) => {
      const file = await media.get(req.scope, req.params.id);
      // Whatever the file claims to be, a browser must not run it as part of this origin.
      reply
        .type(file.contentType)
        .header('X-Content-Type-Options', 'nosniff')
        .header('Content-Security-Policy', "default-src 'none'; sandbox")
        .header('Cache-Control', 'private, max-age=3600');
      if (file.filename)
        reply.header(
          'Content-Disposition',
          `attachment; filename*=UTF-8''${encodeURIComponent(file.filename)}`,
        );
      // Bytes are sent as they are; the schema above only describes them for the document.
      return (reply as FastifyReply).send(file.bytes);
    },
  });
}
