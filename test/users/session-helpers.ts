import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { TestAccount, TestApp } from '../helpers.js';

export const PASSWORD = 'correct horse battery';

/** A signed-in user of a test account, calling as the inbox app does. */
export interface SessionClient {
  userId: string;
  name: string;
  email: string;
  token: string;
  csrf: string;
  /** A request with the session cookie, and the CSRF token on writes. */
  call(opts: InjectOptions): Promise<LightMyRequestResponse>;
}

const unique = () => Math.random().toString(36).slice(2, 10);

/**
 * A client address of its own (10.x.y.z at random). Failed sign-ins are counted per address in
 * the database, and a run's database keeps earlier runs' rows: a fixed address could find itself
 * locked by a run that used it minutes before.
 */
export function anAddress(): string {
  const octet = () => Math.floor(Math.random() * 256);
  return `10.${octet()}.${octet()}.${octet()}`;
}

/** The token of an invite link (after `#token=`). */
export function tokenOf(inviteUrl: string): string {
  const token = new URL(inviteUrl).hash.replace(/^#token=/, '');
  expect(token).toMatch(/^[\w-]{43}$/);
  return token;
}

/** The session cookie's token in a response's Set-Cookie. */
export function cookieOf(res: LightMyRequestResponse): string {
  const header = String(res.headers['set-cookie']);
  const match = /^sb_session=([^;]*);/.exec(header);
  expect(match, header).not.toBeNull();
  return match![1]!;
}

export function sessionClient(t: Pick<TestApp, 'app'>, res: LightMyRequestResponse): SessionClient {
  expect(res.statusCode, res.body).toBe(201);
  const body = res.json();
  const token = cookieOf(res);
  return {
    userId: body.user.id,
    name: body.user.name,
    email: body.user.email,
    token,
    csrf: body.csrf_token,
    call: (o) =>
      t.app.inject({
        ...o,
        headers: {
          cookie: `sb_session=${token}`,
          ...(o.method && o.method !== 'GET' ? { 'x-csrf-token': body.csrf_token } : {}),
          ...(o.headers ?? {}),
        },
      }),
  };
}

/** A new user of the account (invited by its API key) who accepted the invite: signed in. */
export async function signedInUser(
  t: Pick<TestApp, 'app'>,
  acc: TestAccount,
  opts: { role?: 'admin' | 'agent'; name?: string; email?: string; password?: string } = {},
): Promise<SessionClient> {
  const created = await acc.call({
    method: 'POST',
    url: '/v1/users',
    payload: {
      name: opts.name ?? 'Ada Agent',
      email: opts.email ?? `${unique()}@example.com`,
      role: opts.role ?? 'agent',
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  const accepted = await t.app.inject({
    method: 'POST',
    url: '/v1/invites/accept',
    payload: { token: tokenOf(created.json().invite_url), password: opts.password ?? PASSWORD },
  });
  return sessionClient(t, accepted);
}

/** Signs in by email and password. */
/** The address of sign-ins that name none: one per test process. */
const DEFAULT_ADDRESS = anAddress();

export function signIn(
  t: Pick<TestApp, 'app'>,
  payload: Record<string, unknown>,
  remoteAddress = DEFAULT_ADDRESS,
): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url: '/v1/session', payload, remoteAddress });
}
