import type { FastifyInstance, FastifyRequest } from 'fastify';
import { effectiveRateLimit, type AccountsService } from './accounts.service.js';
import type { Scope } from '../db/transactor.js';
import { AppError, Forbidden, Unauthorized } from '../errors.js';
import type { RateLimiter } from '../http/rate-limiter.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated account's scope; every service call of a /v1 route takes it. */
    scope: Scope;
  }
}

// The scheme name is case-insensitive (RFC 9110).
const BEARER = /^Bearer ([A-Za-z0-9_\-.~+/=]{1,512})$/i;

/**
 * API-key authentication, plan check and the per-key rolling rate limit, run before the body is
 * read so that a refused request costs nothing more.
 */
export function installApiAuth(
  app: FastifyInstance,
  deps: { accounts: AccountsService; rateLimiter: RateLimiter },
): void {
  app.decorateRequest('scope', null as unknown as Scope);
  app.addHook('onRequest', async (request: FastifyRequest, reply) => {
    const match = BEARER.exec(request.headers.authorization ?? '');
    if (!match)
      throw new Unauthorized(
        'missing or malformed Authorization header; expected "Bearer <API key>"',
      );
    const owner = await deps.accounts.authenticate(match[1]!);
    if (!owner) throw new Unauthorized('API key is invalid or revoked');
    if (owner.plan === 'starter') {
      throw new Forbidden('the Starter plan has no API access; upgrade to Growth or Enterprise');
    }
    request.scope = { accountId: owner.accountId };
    let decision;
    try {
      decision = await deps.rateLimiter.hit(owner.keyId, effectiveRateLimit(owner));
    } catch (err) {
      // The limiters do not fail on an outage (the Redis one counts in process meanwhile); a
      // failure here is a bug, which must not take the API down: the request goes through
      // uncounted.
      request.log.error({ err }, 'rate limiter failed; request not counted');
      return;
    }
    reply.header('X-RateLimit-Limit', decision.limit);
    reply.header('X-RateLimit-Remaining', decision.remaining);
    reply.header('X-RateLimit-Reset', decision.resetSeconds);
    if (!decision.allowed) {
      reply.header('Retry-After', decision.retryAfterSeconds);
      throw new AppError(
        'rate_limited',
        `rate limit of ${decision.limit} requests per minute exceeded; retry in ${decision.retryAfterSeconds} s`,
      );
    }
  });
}
