import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { STALL_LIMITS, watchForStall, type StallLimits } from '../../media/upload-reader.js';

/**
 * The request's CSV body written to a file of its own as it arrives, never held whole: 400
 * when it is not text/csv, 413 past `maxBytes`, 408 when it stops arriving (DESIGN "Bodies").
 */
export async function receiveCsv(
  request: FastifyRequest,
  maxBytes: number,
  stall: StallLimits = STALL_LIMITS,
): Promise<{ path: string; size: number; sha256: string }> {
  const type = String(request.headers['content-type'] ?? '')
    .split(';')[0]!
    .trim()
    .toLowerCase();
  if (type !== 'text/csv')
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
  const watch = watchForStall(request, stall);
  try {
    await Promise.race([pipeline(request.raw, counted, createWriteStream(path)), watch.stalled]);
  } catch (err) {
    await rm(path, { force: true });
    if (err instanceof AppError) throw err;
    throw new AppError('invalid_request', 'the request body could not be read');
  } finally {
    watch.stop();
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
