import { createHash } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/database.js';
import { AppError, ValidationError } from '../errors.js';

const RETENTION_MS = 24 * 60 * 60 * 1000;
// A request still "running" after this long is presumed dead with its process, so a retry may
// take the key over. Every write of the record is fenced by the lock time its request holds, so
// a request that was only slow, not dead, finds the key taken and rolls its effect back.
const STALE_LOCK_MS = 60_000;
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

interface IdempotentRequest {
  accountId: string;
  method: string;
  path: string;
  key: string;
  committed: boolean;
  replayed: boolean;
  /** When this request took the key; a retry that takes over a stale key moves it. */
  lockedAt: Date;
}

declare module 'fastify' {
  interface FastifyRequest {
    idempotency: IdempotentRequest | null;
  }
  interface FastifyContextConfig {
    /** The route's answer holds a secret: its replay record is stored sealed. */
    holdsSecret?: boolean;
  }
}

/** Order-independent JSON, so `{a,b}` and `{b,a}` are the same body. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

function hashBody(body: unknown): string {
  return createHash('sha256').update(canonical(body)).digest('hex');
}

/**
 * The key's scope: the route with its parameters filled in, not the raw path, so that
 * `/v1/teams/` and `/v1/teams` (or a percent-encoded spelling of an id) share one scope.
 */
export function routeScope(request: FastifyRequest): string {
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  return request.routeOptions.url!.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) =>
    encodeURIComponent(params[name] ?? ''),
  );
}

function idOf(r: IdempotentRequest) {
  return { account_id: r.accountId, method: r.method, path: r.path, key: r.key };
}

/**
 * `Idempotency-Key` on every POST: the first completed response is stored (in the same
 * transaction as the effect, through the scope's before-commit hook) and replayed for 24 h.
 */
/** Encrypts the recorded responses that hold a secret (an API key, a signing secret, an invite). */
export interface ResponseSealer {
  seal(text: string): string;
  open(sealed: string): string;
}

const SEALED = 'sealed:';

export function installIdempotency(
  app: FastifyInstance,
  deps: {
    db: Db;
    clock: Clock;
    /** Null without SECRETS_KEY: a response holding a secret is then not kept for replay. */
    sealer?: ResponseSealer | null;
  },
): void {
  const { db, clock } = deps;
  const sealer = deps.sealer ?? null;
  /** What is stored of a response: as it is, or sealed when it holds a secret. */
  const stored = (request: FastifyRequest, body: string): string | null => {
    if (!request.routeOptions.config.holdsSecret) return body;
    return sealer ? SEALED + sealer.seal(body) : null;
  };
  /** A record sealed under another key (or before SECRETS_KEY was unset) cannot be replayed. */
  const openSealed = (sealed: string): string => {
    try {
      if (sealer) return sealer.open(sealed);
    } catch {
      // fall through to the refusal: the key that sealed it is not this one
    }
    throw new AppError(
      'idempotency_error',
      'this Idempotency-Key was used already, and its answer was sealed under a SECRETS_KEY this service does not hold',
      409,
    );
  };
  app.decorateRequest('idempotency', null);

  async function claim(
    r: IdempotentRequest,
    requestHash: string,
    reply: FastifyReply,
  ): Promise<'proceed' | 'replayed'> {
    const now = clock.now();
    const inserted = await db
      .insertInto('idempotency_keys')
      .values({
        ...idOf(r),
        request_hash: requestHash,
        state: 'running',
        created_at: now,
        locked_at: now,
      })
      .onConflict((oc) => oc.doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) {
      r.lockedAt = now;
      return 'proceed';
    }

    const row = await db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where((eb) => eb.and(idOf(r)))
      .executeTakeFirst();
    if (!row || row.created_at.getTime() <= now.getTime() - RETENTION_MS) {
      // Expired (or deleted meanwhile): forget it and start afresh.
      await db
        .deleteFrom('idempotency_keys')
        .where((eb) => eb.and(idOf(r)))
        .where('created_at', '<=', new Date(now.getTime() - RETENTION_MS))
        .execute();
      return claim(r, requestHash, reply);
    }
    if (row.request_hash !== requestHash) {
      throw new AppError(
        'idempotency_error',
        'this Idempotency-Key was already used with a different request body',
        422,
      );
    }
    if (row.state === 'completed') {
      if (row.response_body === null)
        throw new AppError(
          'idempotency_error',
          'this Idempotency-Key was used already, and its answer held a secret that is not kept without SECRETS_KEY',
          409,
        );
      const body = row.response_body.startsWith(SEALED)
        ? openSealed(row.response_body.slice(SEALED.length))
        : row.response_body;
      r.replayed = true;
      await reply
        .code(row.response_status ?? 200)
        .header('Idempotent-Replayed', 'true')
        .type('application/json; charset=utf-8')
        .send(body);
      return 'replayed';
    }
    if (row.locked_at.getTime() > now.getTime() - STALE_LOCK_MS) {
      throw new AppError(
        'idempotency_error',
        'a request with this Idempotency-Key is still in progress',
        409,
      );
    }
    const taken = await db
      .updateTable('idempotency_keys')
      .set({ locked_at: now })
      .where((eb) => eb.and(idOf(r)))
      .where('state', '=', 'running')
      .where('locked_at', '=', row.locked_at)
      .executeTakeFirst();
    if (taken.numUpdatedRows === 0n) {
      throw new AppError(
        'idempotency_error',
        'a request with this Idempotency-Key is still in progress',
        409,
      );
    }
    r.lockedAt = now;
    return 'proceed';
  }

  /** Records the response while this request still holds the key; false when it no longer does. */
  async function complete(
    trx: Tx | Db,
    r: IdempotentRequest,
    status: number,
    body: string | null,
  ): Promise<boolean> {
    const result = await trx
      .updateTable('idempotency_keys')
      .set({ state: 'completed', response_status: status, response_body: body })
      .where((eb) => eb.and(idOf(r)))
      .where('locked_at', '=', r.lockedAt)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  const preValidation = async (request: FastifyRequest, reply: FastifyReply) => {
    const header = request.headers['idempotency-key'];
    if (request.method !== 'POST' || header === undefined || !request.scope) return;
    const key = Array.isArray(header) ? header[0]! : header;
    if (!KEY_PATTERN.test(key)) {
      throw new ValidationError('Idempotency-Key', 'must be 1 to 255 visible ASCII characters');
    }
    const r: IdempotentRequest = {
      accountId: request.scope.accountId,
      method: request.method,
      path: routeScope(request),
      key,
      committed: false,
      replayed: false,
      lockedAt: new Date(0),
    };
    if ((await claim(r, hashBody(request.body), reply)) === 'replayed') return reply;
    // Only a request that holds the key may record its response: a refused one (other body,
    // still running) must not overwrite the record of the request that does.
    request.idempotency = r;
    const successStatus =
      (request.routeOptions.config as { successStatus?: number }).successStatus ?? 200;
    // The effect and the record of its response commit together; onSend then stores the exact bytes.
    request.scope = {
      ...request.scope,
      beforeCommit: async (trx, result) => {
        if (r.committed) return;
        if (!(await complete(trx, r, successStatus, stored(request, JSON.stringify(result))))) {
          // Taken over by a retry after STALE_LOCK_MS: this effect must not commit as well.
          throw new AppError(
            'idempotency_error',
            'this Idempotency-Key was taken over by a retry of the request',
            409,
          );
        }
      },
      // Only a transaction that committed counts: one rolled back (and run again, as a grouped
      // send is after its group fails) records the response again in its next transaction.
      afterCommit: () => {
        r.committed = true;
      },
    };
  };

  const onSend = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const r = request.idempotency;
    if (!r || r.replayed) return payload;
    const status = reply.statusCode;
    if (status === 429 || status >= 500) {
      // Not stored: the client may try again. An effect that did commit keeps its record.
      if (!r.committed) {
        try {
          await db
            .deleteFrom('idempotency_keys')
            .where((eb) => eb.and(idOf(r)))
            .where('state', '=', 'running')
            .where('locked_at', '=', r.lockedAt)
            .execute();
        } catch (err) {
          // The database gone too (the likely cause of this 503): the answer goes out as it is,
          // in our envelope; the key, still running, is taken over once its lock goes stale.
          request.log.warn({ err }, 'idempotency key not released after a failed request');
        }
      }
      return payload;
    }
    await complete(
      db,
      r,
      status,
      stored(request, typeof payload === 'string' ? payload : JSON.stringify(payload)),
    );
    return payload;
  };

  // On the POST routes only: the reads (most requests) do not pay for two hooks that do nothing.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.includes('POST')) return;
    const asList = <T>(hooks: T | T[] | undefined): T[] =>
      hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
    route.preValidation = [...asList(route.preValidation), preValidation];
    route.onSend = [...asList(route.onSend), onSend];
  });
}

/**
 * Deletes keys past their 24 h retention, a batch at a time so that no statement holds many
 * row locks or runs long; returns how many went. Workers run it periodically.
 */
export async function pruneIdempotencyKeys(db: Db, now: Date, batchSize = 10_000): Promise<number> {
  const cutoff = new Date(now.getTime() - RETENTION_MS);
  let deleted = 0;
  for (;;) {
    const result = await sql`
      DELETE FROM idempotency_keys WHERE ctid IN (
        SELECT ctid FROM idempotency_keys WHERE created_at <= ${cutoff} LIMIT ${batchSize})`.execute(
      db,
    );
    const n = Number(result.numAffectedRows ?? 0n);
    deleted += n;
    if (n < batchSize) return deleted;
  }
}

/** Prunes expired idempotency keys now and every `everyMs`; the returned function stops it. */
export function schedulePruning(
  deps: { db: Db; clock: Clock; log: FastifyBaseLogger },
  everyMs = 600_000,
): () => void {
  const run = () =>
    pruneIdempotencyKeys(deps.db, deps.clock.now()).catch((err: unknown) =>
      deps.log.warn({ err }, 'pruning expired idempotency keys failed; next try in 10 minutes'),
    );
  void run();
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
