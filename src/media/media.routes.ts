import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { errorResponses, ErrorRef, IdParams } from '../http/schemas.js';
import { validatorCompiler } from '../http/validation.js';
import type { MediaService, StoredMedia } from './media.service.js';
import { UploadedMedia, UploadForm } from './media.schema.js';
import { readUpload, type ReadUpload } from './upload-reader.js';

/**
 * `GET /v1/media/{id}` (a kept file with its original content type) and `POST /v1/media` (an
 * upload); register under /v1.
 */
export function mediaRoutes(app: FastifyInstance, media: MediaService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get('/media/:id', {
    schema: {
      tags: ['Messages'],
      operationId: 'getMedia',
      summary: "A kept file: received with an inbound message, or uploaded (a message's media_url)",
      params: IdParams,
      response: {
        200: {
          description: 'The file, with the content type it arrived with.',
          content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
        },
        ...errorResponses(404),
      },
    },
    handler: async (req, reply) => sendFile(reply, await media.get(req.scope, req.params.id)),
  });
  // Multipart is parsed on this route alone: the rest of /v1 takes JSON up to 1 MiB.
  void app.register(async (uploads) => {
    await uploads.register(multipart, { throwFileSizeLimit: true });
    uploadRoute(uploads, media);
  });
}

/** The bytes each upload request read, until its handler keeps them. */
const readUploads = new WeakMap<FastifyRequest, ReadUpload>();

/** The body is read and checked by readUpload; its schema only describes it for the document. */
const bodyDescribedOnly: typeof validatorCompiler = (route) =>
  route.httpPart === 'body' ? () => true : validatorCompiler(route);

function uploadRoute(app: FastifyInstance, media: MediaService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.post('/media', {
    config: { access: 'agent', successStatus: 201 },
    validatorCompiler: bodyDescribedOnly,
    // Before the idempotency check (added after this one), which hashes what it leaves as the
    // body: the parts (the file's name, size and digest), never the multipart boundary.
    preValidation: async (req, reply) => {
      let upload: ReadUpload;
      try {
        upload = await readUpload(req, media.maxUploadBytes);
      } catch (err) {
        // What is left of the body is not read: the connection cannot carry another request.
        void reply.header('Connection', 'close');
        throw err;
      }
      readUploads.set(req, upload);
      (req as FastifyRequest).body = {
        file: { filename: upload.filename, size: upload.bytes.length, sha256: upload.sha256 },
      };
    },
    schema: {
      tags: ['Messages'],
      operationId: 'uploadMedia',
      summary: 'Upload a file to send (its id goes in media_id)',
      description:
        'One multipart part named `file`, up to MEDIA_MAX_BYTES (16 MiB by default). Its type is told by its bytes, never its name or declared type: JPEG, PNG, WebP, PDF, Word, Excel and PowerPoint (legacy and Office Open XML) and OpenDocument files are taken, anything else is a 422. With `Idempotency-Key`, a retry is recognised by its parts (the file name and the digest of its bytes), whatever the boundary.\n\n```sh\ncurl -F file=@receipt.png -H "Authorization: Bearer $KEY" $URL/v1/media\n```',
      consumes: ['multipart/form-data'],
      body: UploadForm,
      response: {
        201: UploadedMedia,
        400: ErrorRef,
        408: ErrorRef,
        413: ErrorRef,
        ...errorResponses(422),
      },
    },
    handler: async (req, reply) => {
      const upload = readUploads.get(req)!;
      const kept = await media.upload(req.scope, upload);
      return reply.code(201).send(kept);
    },
  });
}

/**
 * `GET /media/{account_id}/{id}/{signature}` (and the same with `/{filename}` after it, the name
 * only for the fetcher's sake): a file by its signed link, without an API key. Outside /v1:
 * whoever holds the link (a provider, a webchat visitor) holds nothing else of ours.
 */
export function mediaLinkRoutes(app: FastifyInstance, media: MediaService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const params = {
    account_id: Type.String(),
    id: Type.String(),
    signature: Type.String({ description: '`<expires>.<mac>`, as the link was given.' }),
  };
  const schema = {
    tags: ['Messages'],
    operationId: 'getMediaByLink',
    summary: 'A file by its signed link (what a provider or a webchat visitor is given)',
    description:
      'The link works for about an hour after it was made; a forged, altered or expired link is a 403, a file gone a 404. No API key.',
    security: [],
    params: Type.Object(params),
    response: {
      200: {
        description: 'The file, with its content type.',
        content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
      },
      403: ErrorRef,
      404: ErrorRef,
    },
  };
  type Params = { account_id: string; id: string; signature: string };
  const handler = async (req: FastifyRequest<{ Params: Params }>, reply: FastifyReply) => {
    const { account_id: accountId, id: mediaId, signature } = req.params;
    return sendFile(reply, await media.getByLink({ accountId, mediaId }, signature));
  };
  r.get('/media/:account_id/:id/:signature', { schema, handler });
  r.get('/media/:account_id/:id/:signature/:filename', {
    schema: {
      ...schema,
      hide: true,
      params: Type.Object({ ...params, filename: Type.String() }),
    },
    handler,
  });
}

function sendFile(reply: FastifyReply, file: StoredMedia) {
  // Whatever the file claims to be, a browser must not run it as part of this origin.
  reply
    .type(file.contentType)
    .header('X-Content-Type-Options', 'nosniff')
    .header('Content-Security-Policy', "default-src 'none'; sandbox")
    .header('Cache-Control', 'private, max-age=3600');
  // Opened, a file is saved under its name, never shown as a page of ours (<img> shows images).
  if (file.filename)
    reply.header(
      'Content-Disposition',
      `attachment; filename*=UTF-8''${encodeURIComponent(file.filename)}`,
    );
  // Bytes are sent as they are; the schema above only describes them for the document.
  return reply.send(file.bytes);
}
