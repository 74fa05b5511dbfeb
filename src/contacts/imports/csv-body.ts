import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';

/**
 * The request's CSV body (`body`, the stream its content type parser was given, which fails
 * with a 408 when it stops arriving: http/body-stall.ts) written to a file of its own as it
 * arrives, never held whole: 400 when it is not text/csv, 413 past `maxBytes`.
 */
export async function receiveCsv(
  request: FastifyRequest,
  body: Readable | undefined,
  maxBytes: number,
): Promise<{ path: string; size: number; sha256: string }> {
  const type = String(request.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  if (type !== 'text/csv' || !body)
    throw new AppError('invalid_request', 'Content-Type must be text/csv (UTF-8, a header row)');
  const path = join(tmpdir(), `switchboard-import-${randomUUID()}.csv`);
  const hash = createHash('sha256');
  let size = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (size > maxBytes) {
        done(
          new AppError(
            'payload_too_large',
            `body: is larger than ${maxBytes} bytes (IMPORT_MAX_BYTES)`,
          ),
        );
        return;
      }
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(body, counted, createWriteStream(path));
  } catch (err) {
    await rm(path, { force: true });
    if (err instanceof AppError) throw err;
    throw new AppError('invalid_request', 'the request body could not be read');
  }
  if (size === 0) {
    await rm(path, { force: true });
    throw new AppError(
      'validation_error',
      'body: is empty; send a CSV file with a header row',
      422,
      [{ field: 'body', issue: 'is empty; send a CSV file with a header row' }],
    );
  }
  return { path, size, sha256: hash.digest('hex') };
}
