import type { FastifyInstance, FastifyRequest } from 'fastify';
import { timingSafeEqual } from 'node:crypto';
import type { Author } from '../db/schema.js';
import type { Scope } from '../db/transactor.js';
import { AppError, Forbidden, Unauthorized } from '../errors.js';
import { readCookie, SESSION_COOKIE } from './cookies.js';
import type { RateLimiter } from './rate-limiter.js';

/** Who a request is from, once its credential is checked. */
export interface Principal {
  accountId: string;
  role: 'admin' | 'agent';
  /** The signed-in user; null for an API key (which acts as an admin). */
  actor: Author | null;
  /** Set when the credential is an API key. */
  keyId?: string;
  /** Set when the credential is a session cookie. */
  session?: { tokenHash: string; csrfToken: string; userId: string };
  /** The rolling per-minute limit the request counts against. */
  rate: { key: string; limit: number };
}

/** How each credential is checked; a refusal throws (401, or 403 for a plan without API access). */
export interface Authenticators {
  apiKey(key: string): Promise<Principal>;
  /** The session's principal, or undefined when it is unknown or has ended. */
  session(token: string): Promise<Principal | undefined>;
}

/**
 * What a route asks of its caller, in its `config`: `access` the least role (by default `agent`
 * for reads and `admin` for writes), and `credentials` `none` for the two routes that make a
 * session, or `session` for those that only a signed-in user has.
 */
export interface AccessConfig {
  access?: 'agent' | 'admin';
  credentials?: 'none' | 'session';
}

/** Who may call a route: `anyone` (sign-in), or the least role. */
export interface RouteAccess {
  method: string;
  url: string;
  access: 'anyone' | 'agent' | 'admin';
  /** Only a signed-in session (not an API key) may call it. */
  sessionOnly: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every /v1 route with the role it needs (the docs' route × role table, walked by a test). */
    routeAccess: RouteAccess[];
  }
  interface FastifyContextConfig extends AccessConfig {
    /** The status of the route's success (idempotency replays it). */
    successStatus?: number;
  }
  interface FastifyRequest {
    /** The authenticated account's scope; every service call of a /v1 route takes it. */
    scope: Scope;
    principal: Principal | null;
  }
}

// The scheme name is case-insensitive (RFC 9110).
const BEARER = /^Bearer ([A-Za-z0-9_\-.~+/=]{1,512})$/i;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The role a route needs: its own `access`, else agents read and admins write. */
export function accessOf(method: string, config: AccessConfig): 'agent' | 'admin' {
  return config.access ?? (SAFE_METHODS.has(method) ? 'agent' : 'admin');
}

/**
 * Authentication of every /v1 request, before its body is read: the API key (`Authorization`
 * wins when both are sent) or the session cookie (then a write must carry `X-CSRF-Token`), the
 * caller's rolling rate limit, and the route's role.
 */
export function installAuth(
  app: FastifyInstance,
  deps: {
    authenticators: Authenticators;
    rateLimiter: RateLimiter;
    /** Where each route's access is noted as it is added. */
    routeAccess?: RouteAccess[];
  },
): void {
  app.decorateRequest('scope', null as unknown as Scope);
  app.decorateRequest('principal', null);
  app.addHook('onRoute', (route) => {
    const config = (route.config ?? {}) as AccessConfig;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      deps.routeAccess?.push({
        method,
        url: route.url,
        access: config.credentials === 'none' ? 'anyone' : accessOf(method, config),
        sessionOnly: config.credentials === 'session',
      });
    }
  });
  app.addHook('onRequest', async (request: FastifyRequest, reply) => {
    const config = request.routeOptions.config as AccessConfig;
    if (config.credentials === 'none') return;
    const principal = await authenticate(request, deps.authenticators);
    if (config.credentials === 'session' && !principal.session)
      throw new Unauthorized('this route needs a signed-in session, not an API key');
    request.principal = principal;
    request.scope = { accountId: principal.accountId, actor: principal.actor };
    let decision;
    try {
      decision = await deps.rateLimiter.hit(principal.rate.key, principal.rate.limit);
    } catch (err) {
      // The limiters do not fail on an outage (the Redis one counts in process meanwhile); a
      // failure here is a bug, which must not take the API down: the request goes through
      // uncounted.
      request.log.error({ err }, 'rate limiter failed; request not counted');
      decision = null;
    }
    if (decision) {
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
    }
    if (principal.role === 'agent' && accessOf(request.method, config) === 'admin')
      throw new Forbidden('this needs the admin role; agents cannot do it');
  });
}

async function authenticate(request: FastifyRequest, auth: Authenticators): Promise<Principal> {
  const header = request.headers.authorization;
  if (header !== undefined) {
    const match = BEARER.exec(header);
    if (!match)
      throw new Unauthorized('malformed Authorization header; expected "Bearer <API key>"');
    return auth.apiKey(match[1]!);
  }
  const token = readCookie(request.headers.cookie, SESSION_COOKIE);
  if (token === undefined)
    throw new Unauthorized(
      'missing credentials: send an API key as "Authorization: Bearer <API key>", or sign in',
    );
  const principal = await auth.session(token);
  if (!principal) throw new Unauthorized('the session has ended; sign in again');
  if (!SAFE_METHODS.has(request.method) && !csrfMatches(request, principal.session!.csrfToken))
    throw new Forbidden('a request made with the session cookie needs its X-CSRF-Token header');
  return principal;
}

function csrfMatches(request: FastifyRequest, expected: string): boolean {
  const given = request.headers['x-csrf-token'];
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
