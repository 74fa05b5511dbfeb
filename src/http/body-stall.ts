import { Transform, type Readable, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';

/** DESIGN "Bodies": a body that stops arriving ends the request with 408. */
export interface StallLimits {
  /** No byte for this long. */
  idleMs: number;
  /** After `graceMs`, an average rate under this (bytes per second). */
  minBytesPerSecond: number;
  graceMs: number;
}
export const STALL_LIMITS: StallLimits = {
  idleMs: 10_000,
  minBytesPerSecond: 1024,
  graceMs: 10_000,
};

declare module 'fastify' {
  interface FastifyInstance {
    /** The limits every request body is read under (installBodyStallGuard). */
    bodyStall: StallLimits;
  }
}

const stalledError = () => {
  const err = new AppError('invalid_request', 'the request body stopped arriving', 408);
  // Fastify's body reader keeps a status of 400 or more that an error of the stream carries.
  return Object.assign(err, { statusCode: 408 });
};

/**
 * The clock of one body: told of every chunk, it calls `onStall` once when none came for
 * `idleMs`, or when, past `graceMs`, they average under `minBytesPerSecond`. Time during which
 * `readerWaiting` says the reader itself holds back (a slow disk, a busy parser) counts neither
 * as idle nor against the rate: only the client's pace is judged.
 */
function startStallClock(
  limits: StallLimits,
  readerWaiting: () => boolean,
  onStall: (err: AppError) => void,
): { received: (bytes: number) => void; stop: () => void } {
  let lastByte = Date.now();
  let lastTick = lastByte;
  let waitedMs = 0;
  let received = 0;
  const timer = setInterval(
    () => {
      const now = Date.now();
      if (!readerWaiting()) {
        lastByte = now;
        lastTick = now;
        return;
      }
      waitedMs += now - lastTick;
      lastTick = now;
      const slow =
        waitedMs > limits.graceMs && (received * 1000) / waitedMs < limits.minBytesPerSecond;
      if (now - lastByte > limits.idleMs || slow) {
        clearInterval(timer);
        onStall(stalledError());
      }
    },
    Math.max(10, Math.min(1000, limits.idleMs / 4)),
  );
  timer.unref();
  return {
    received: (bytes) => {
      lastByte = Date.now();
      received += bytes;
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * The request's body as its parser reads it, failing with a 408 when it stops arriving. Lazy:
 * nothing is read from `source`, and no clock runs, until the parser asks for the first bytes,
 * so a route that reads the raw request itself (multipart) or never reads the body is left alone.
 */
class GuardedBody extends Transform {
  #clock: ReturnType<typeof startStallClock> | null = null;

  constructor(
    private readonly source: Readable,
    private readonly limits: StallLimits,
  ) {
    super();
  }

  override _read(size: number): void {
    if (!this.#clock) {
      this.#clock = startStallClock(
        this.limits,
        () => this.readableLength < this.readableHighWaterMark,
        (err) => this.destroy(err),
      );
      // A client gone mid-body ends the read with its error. The request itself is never
      // destroyed here (that would cut the socket before the 408 is written).
      this.source.once('error', (err) => this.destroy(err));
      this.source.pipe(this);
    }
    super._read(size);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#clock?.received(chunk.length);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    this.#clock?.stop();
    done();
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    this.#clock?.stop();
    this.source.unpipe(this);
    done(err);
  }
}

/**
 * Every request body the app's parsers read (JSON, the provider webhooks' raw bytes, a CSV
 * import) is read through a guard that ends it with a 408 when it stops arriving, and the
 * connection is then closed: the rest of that body cannot be told from a next request.
 * `POST /v1/media`, whose multipart reader takes the raw request, watches it with
 * `watchForStall` under the same limits (`app.bodyStall`).
 */
export function installBodyStallGuard(app: FastifyInstance, limits: StallLimits): void {
  app.decorate('bodyStall', limits);
  app.addHook('preParsing', async (request, reply, payload) => {
    if (!hasBody(request)) return payload;
    const guarded = new GuardedBody(payload, limits);
    guarded.once('error', () => void reply.header('Connection', 'close'));
    return guarded;
  });
  // A body nobody read (a request refused before its body, a GET that carries one) would be
  // drained by Node at whatever pace the client likes: the connection ends with the answer.
  app.addHook('onSend', async (request, reply) => {
    if (hasBody(request) && !request.raw.complete) void reply.header('Connection', 'close');
  });
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (
    request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
  );
}

/**
 * Watches the raw request's bytes arrive, for a reader that takes `request.raw` itself;
 * `stalled` rejects with the 408 when they stop (see startStallClock). Time during which the
 * reader has paused the request is not held against the client.
 */
export function watchForStall(
  request: FastifyRequest,
  limits: StallLimits = request.server.bodyStall ?? STALL_LIMITS,
): { stalled: Promise<never>; stop: () => void } {
  let clock: ReturnType<typeof startStallClock> | undefined;
  const onData = (chunk: Buffer) => clock?.received(chunk.length);
  const stalled = new Promise<never>((_, reject) => {
    clock = startStallClock(limits, () => request.raw.readableFlowing !== false, reject);
  });
  // Nobody may be waiting on it once the body was read: its rejection is handled here.
  stalled.catch(() => undefined);
  request.raw.on('data', onData);
  return {
    stalled,
    stop: () => {
      clock?.stop();
      request.raw.off('data', onData);
    },
  };
}
