import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sessionCookie } from '../http/cookies.js';
import { ErrorRef, Success, errorResponses } from '../http/schemas.js';
import { SESSION_MAX_MS, type SessionsService, type SignedIn } from './sessions.service.js';
import { AcceptInviteBody, ChangePasswordBody, Session, SignInBody } from './users.schema.js';

/**
 * Sessions of the inbox app: sign-in (and invite acceptance) answer the session's body and set
 * its cookie; neither needs a credential, a CSRF token or an Idempotency-Key.
 */
export function sessionRoutes(
  app: FastifyInstance,
  sessions: SessionsService,
  opts: { secureCookie: boolean },
): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const started = (reply: FastifyReply, signedIn: SignedIn) =>
    reply
      .code(201)
      .header(
        'Set-Cookie',
        sessionCookie(signedIn.token, {
          secure: opts.secureCookie,
          maxAgeSeconds: SESSION_MAX_MS / 1000,
        }),
      )
      .header('Cache-Control', 'no-store')
      .send(signedIn.session);

  r.post('/session', {
    config: { credentials: 'none', successStatus: 201 },
    schema: {
      tags: ['Sessions'],
      operationId: 'signIn',
      summary: 'Sign in to the inbox (sets the sb_session cookie)',
      security: [],
      body: SignInBody,
      response: { 201: Session, 401: ErrorRef, 409: ErrorRef, 422: ErrorRef, 429: ErrorRef },
    },
    handler: async (req, reply) => started(reply, await sessions.signIn(req.body, req.ip)),
  });
  r.post('/invites/accept', {
    config: { credentials: 'none', successStatus: 201 },
    schema: {
      tags: ['Sessions'],
      operationId: 'acceptInvite',
      summary: 'Set a password from an invite link, and sign in',
      security: [],
      body: AcceptInviteBody,
      response: { 201: Session, 404: ErrorRef, 409: ErrorRef, 422: ErrorRef },
    },
    handler: async (req, reply) => started(reply, await sessions.acceptInvite(req.body)),
  });
  r.get('/session', {
    config: { credentials: 'session' },
    schema: {
      tags: ['Sessions'],
      operationId: 'getSession',
      summary: 'The signed-in user, their account, and the CSRF token',
      response: { 200: Session, ...errorResponses() },
    },
    handler: async (req, reply) =>
      reply.header('Cache-Control', 'no-store').send(await sessions.describe(req.principal!)),
  });
  r.delete('/session', {
    config: { credentials: 'session', access: 'agent' },
    schema: {
      tags: ['Sessions'],
      operationId: 'signOut',
      summary: 'Sign out: the session ends at once and its cookie is cleared',
      response: { 200: Success, ...errorResponses() },
    },
    handler: async (req, reply) => {
      await sessions.signOut(req.principal!);
      return reply
        .header('Set-Cookie', sessionCookie('', { secure: opts.secureCookie, maxAgeSeconds: 0 }))
        .send({ success: true as const });
    },
  });
  r.post('/session/password', {
    config: { credentials: 'session', access: 'agent' },
    schema: {
      tags: ['Sessions'],
      operationId: 'changePassword',
      summary: "Change the signed-in user's password (their other sessions end)",
      body: ChangePasswordBody,
      response: { 200: Success, ...errorResponses(422) },
    },
    handler: (req) => sessions.changePassword(req.scope, req.principal!, req.body),
  });
}
