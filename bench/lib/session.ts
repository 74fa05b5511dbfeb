/**
 * Inbox users for the suites, made and signed in through the API as the app does it: an invite
 * from POST /v1/users (or POST /v1/users/{id}/invite for an existing user), accepted with a
 * password at POST /v1/invites/accept, then POST /v1/session for the `sb_session` cookie.
 */
import { assertLocal } from './http.js';

export interface SignedIn {
  userId: string;
  email: string;
  /** `sb_session=…`, for a Cookie header. */
  cookie: string;
  csrfToken: string;
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; setCookie: string[] }> {
  assertLocal(url);
  const res = await fetch(url, {
    method: 'POST',
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    parsed = { text };
  }
  return {
    status: res.status,
    body: (parsed ?? {}) as Record<string, unknown>,
    setCookie: res.headers.getSetCookie(),
  };
}

function expectStatus(what: string, expected: number, res: { status: number; body: unknown }) {
  if (res.status !== expected)
    throw new Error(
      `${what}: expected ${expected}, got ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`,
    );
}

/** The token of an invite link (`…#token=…`). */
function inviteToken(inviteUrl: unknown): string {
  const token = new URLSearchParams(new URL(String(inviteUrl)).hash.slice(1)).get('token');
  if (!token) throw new Error(`no token in the invite link ${String(inviteUrl)}`);
  return token;
}

/** Accepts the invite with `password`, then signs in with it: the session's cookie. */
async function acceptAndSignIn(
  baseUrl: string,
  inviteUrl: unknown,
  user: { id: string; email: string },
  accountId: string,
  password: string,
): Promise<SignedIn> {
  expectStatus(
    'POST /v1/invites/accept',
    201,
    await post(`${baseUrl}/v1/invites/accept`, { token: inviteToken(inviteUrl), password }),
  );
  const session = await post(`${baseUrl}/v1/session`, {
    email: user.email,
    password,
    account_id: accountId,
  });
  expectStatus('POST /v1/session', 201, session);
  const cookie = session.setCookie
    .map((c) => c.split(';')[0] ?? '')
    .find((c) => c.startsWith('sb_session='));
  if (!cookie) throw new Error('POST /v1/session set no sb_session cookie');
  return {
    userId: user.id,
    email: user.email,
    cookie,
    csrfToken: typeof session.body.csrf_token === 'string' ? session.body.csrf_token : '',
  };
}

/** A new agent of the account (POST /v1/users with its API key), signed in. */
export async function newSignedInAgent(
  baseUrl: string,
  apiKey: string,
  accountId: string,
  user: { name: string; email: string; password: string },
): Promise<SignedIn> {
  const created = await post(
    `${baseUrl}/v1/users`,
    { name: user.name, email: user.email, role: 'agent' },
    { authorization: `Bearer ${apiKey}` },
  );
  expectStatus('POST /v1/users', 201, created);
  return acceptAndSignIn(
    baseUrl,
    created.body.invite_url,
    { id: String(created.body.id), email: user.email },
    accountId,
    user.password,
  );
}

/** An existing user of the account, given a password through a new invite, signed in. */
export async function reinvitedUser(
  baseUrl: string,
  apiKey: string,
  accountId: string,
  user: { id: string; email: string; password: string },
): Promise<SignedIn> {
  const invited = await post(`${baseUrl}/v1/users/${user.id}/invite`, undefined, {
    authorization: `Bearer ${apiKey}`,
  });
  expectStatus(`POST /v1/users/${user.id}/invite`, 200, invited);
  return acceptAndSignIn(baseUrl, invited.body.invite_url, user, accountId, user.password);
}
