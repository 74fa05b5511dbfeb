import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Multipart } from '@fastify/multipart';
import { AppError, ValidationError } from '../errors.js';
import { watchForStall, type StallLimits } from '../http/body-stall.js';

/** The one file of a `POST /v1/media` body, read whole. */
export interface ReadUpload {
  bytes: Buffer;
  /** As the part named it (path and all), or null when it named none. */
  filename: string | null;
  /** Hex SHA-256 of the bytes: what an idempotent retry is recognised by, with the name. */
  sha256: string;
}

const tooLarge = (maxBytes: number) =>
  new AppError('payload_too_large', `file: is larger than ${maxBytes} bytes (MEDIA_MAX_BYTES)`);

/**
 * Reads a multipart body holding exactly one part, the file named `file`, up to `maxBytes`.
 * Every way a body can be wrong is an error of ours (never a 500): not multipart (400, as any wrong content type), no file
 * or an empty one, another part, a second file (422), too large (413), malformed (400), stalled
 * (408, under `stall` or the app's limits).
 */
export async function readUpload(
  request: FastifyRequest,
  maxBytes: number,
  stall?: StallLimits,
): Promise<ReadUpload> {
  if (!request.isMultipart())
    throw new AppError(
      'invalid_request',
      'Content-Type must be multipart/form-data, with the file in a part named file',
    );
  const watch = watchForStall(request, stall);
  try {
    return await Promise.race([readParts(request, maxBytes), watch.stalled]);
  } catch (err) {
    throw refusal(err, maxBytes);
  } finally {
    watch.stop();
  }
}

async function readParts(request: FastifyRequest, maxBytes: number): Promise<ReadUpload> {
  let upload: ReadUpload | null = null;
  const parts = request.parts({
    limits: { fileSize: maxBytes, files: 2, fields: 4, parts: 8, fieldSize: 64 * 1024 },
  });
  for await (const part of parts) {
    if (part.fieldname !== 'file') throw unknownPart(part);
    if (part.type !== 'file')
      throw new ValidationError('file', 'must be a file part (with a filename), not a form field');
    if (upload) throw new ValidationError('file', 'must be sent once: only one file per upload');
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    for await (const chunk of part.file as AsyncIterable<Buffer>) {
      hash.update(chunk);
      chunks.push(chunk);
    }
    if (part.file.truncated) throw tooLarge(maxBytes);
    upload = {
      bytes: Buffer.concat(chunks),
      filename: part.filename || null,
      sha256: hash.digest('hex'),
    };
  }
  if (!upload) throw new ValidationError('file', 'is required: a multipart part named file');
  if (upload.bytes.length === 0) throw new ValidationError('file', 'is empty');
  return upload;
}

function unknownPart(part: Multipart): AppError {
  const name = part.fieldname.slice(0, 100);
  return new ValidationError(name, 'unknown part: the only part is file');
}

/** Our error for anything the multipart reader threw. */
function refusal(err: unknown, maxBytes: number): AppError {
  if (err instanceof AppError) return err;
  const code = (err as { code?: unknown }).code;
  if (code === 'FST_REQ_FILE_TOO_LARGE') return tooLarge(maxBytes);
  if (code === 'FST_FILES_LIMIT')
    return new ValidationError('file', 'must be sent once: only one file per upload');
  if (code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT')
    return new ValidationError('body', 'has too many parts: send one part, named file');
  const message = err instanceof Error ? err.message : String(err);
  return new AppError('invalid_request', `the multipart body is malformed: ${message}`);
}
