import { rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorRef, IdParams, errorResponses } from '../../http/schemas.js';
import { validatorCompiler } from '../../http/validation.js';
import { receiveCsv } from './csv-body.js';
import type { ContactImportsService } from './imports.service.js';
import {
  ExportQuery,
  ImportBody,
  ImportQuery,
  ImportReport,
  ImportStarted,
} from './imports.schema.js';

/** The file each import request wrote, until the import takes it. */
const received = new WeakMap<FastifyRequest, string>();
/** Each import request's body, as its content type parser was given it (read by receiveCsv). */
const csvBodies = new WeakMap<FastifyRequest, Readable>();

/** The body is streamed to a file by receiveCsv; its schema only describes it for the document. */
const bodyDescribedOnly: typeof validatorCompiler = (route) =>
  route.httpPart === 'body' ? () => true : validatorCompiler(route);

/**
 * `POST /v1/contacts/imports` (a CSV file, streamed to disk, then imported in the background),
 * `GET /v1/contacts/imports/{id}` (its report) and `GET /v1/contacts/export` (CSV, streamed as
 * it is read). Register under /v1.
 */
export function contactCsvRoutes(app: FastifyInstance, imports: ContactImportsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Contacts'];
  app.addHook('onClose', () => imports.settled());

  r.get('/contacts/imports/:id', {
    schema: {
      tags,
      operationId: 'getContactImport',
      summary: "A contacts import's progress and report",
      params: IdParams,
      response: { 200: ImportReport, ...errorResponses(404) },
    },
    handler: (req) => imports.get(req.scope, req.params.id),
  });

  r.get('/contacts/export', {
    schema: {
      tags,
      operationId: 'exportContacts',
      summary: 'The contacts of a search as CSV, streamed',
      description:
        "The contacts the filters pass (as `GET /v1/contacts` takes them), newest first, in the import's columns: `phone`, `name`, `email`, `tags` (joined by `;`), `lifecycle_stage`, and `custom_fields.<key>` for every key any of them has. Streamed as it is read. A cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return) is written with a `'` before it, so that a spreadsheet shows it as text instead of running it as a formula; the phone (always `+` and digits) is written as it is, and an import takes the `'` off again.",
      querystring: ExportQuery,
      response: {
        200: {
          description: 'CSV (UTF-8), one row per contact after the header.',
          content: { 'text/csv': { schema: { type: 'string' } } },
        },
        ...errorResponses(422),
      },
    },
    handler: (req, reply) => {
      sendCsv(reply, imports.export(req.scope, req.query));
    },
  });

  // text/csv is taken on this route alone, as a stream (its size is checked as it arrives).
  void app.register(async (csv) => {
    csv.addContentTypeParser('text/csv', (req, payload, done) => {
      csvBodies.set(req, payload);
      done(null, undefined);
    });
    importRoute(csv, imports);
  });
}

function importRoute(app: FastifyInstance, imports: ContactImportsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.post('/contacts/imports', {
    config: { access: 'admin', successStatus: 202 },
    validatorCompiler: bodyDescribedOnly,
    // Before the idempotency check (added after this one), which hashes what it leaves as the
    // body: the file's size and digest.
    preValidation: async (req, reply) => {
      try {
        const file = await receiveCsv(req, csvBodies.get(req), imports.maxBytes);
        received.set(req, file.path);
        (req as FastifyRequest).body = { file: { size: file.size, sha256: file.sha256 } };
      } catch (err) {
        // What is left of the body is not read: the connection cannot carry another request.
        void reply.header('Connection', 'close');
        throw err;
      }
    },
    // A file no import took (a refused header, a replayed request) goes.
    onResponse: async (req) => {
      const path = received.get(req);
      if (path !== undefined) await rm(path, { force: true });
    },
    schema: {
      tags: ['Contacts'],
      operationId: 'importContacts',
      summary: 'Import contacts from CSV',
      description:
        "Body `text/csv` (UTF-8, a header row), up to IMPORT_MAX_BYTES (100 MB by default). A row whose phone belongs to a contact updates it (or is skipped with `on_conflict=skip`); an empty cell leaves its field as it is; `tags` replace the contact's tags, `custom_fields.<key>` cells are merged into its fields. A phone repeated in the file updates the contact its earlier row made. A row with one bad cell (a NUL character included) fails whole and is reported by its line. An unknown column is a 422 naming it. Created rows emit `contact.created`, updated ones `contact.updated` (a row that changes nothing counts as updated, with no event). The file is read in the background: follow `GET /v1/contacts/imports/{id}`.\n\n```sh\ncurl -H 'Content-Type: text/csv' --data-binary @contacts.csv -H \"Authorization: Bearer $KEY\" $URL/v1/contacts/imports\n```",
      consumes: ['text/csv'],
      querystring: ImportQuery,
      body: ImportBody,
      response: {
        202: ImportStarted,
        400: ErrorRef,
        408: ErrorRef,
        413: ErrorRef,
        ...errorResponses(422),
      },
    },
    handler: async (req, reply) => {
      const path = received.get(req)!;
      const started = await imports.start(req.scope, path, req.query.on_conflict ?? 'update');
      received.delete(req);
      return reply.code(202).send(started);
    },
  });
}

/** CSV text sent as it is produced (the client's pace sets the reads'). */
function sendCsv(reply: FastifyReply, lines: AsyncIterable<string>): void {
  void reply
    .type('text/csv; charset=utf-8')
    .header('X-Content-Type-Options', 'nosniff')
    .header('Content-Disposition', 'attachment; filename="contacts.csv"')
    .send(Readable.from(lines));
}
