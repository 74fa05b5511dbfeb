// The one way the app talks to the service: /v1 only, typed from docs/openapi.json (generated
// into openapi.d.ts by `npm run app:api`), with the session cookie and, on writes, the CSRF
// token the session handed out.
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './openapi.js';

/** A refusal of the API, in its error envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

let csrfToken: string | null = null;
/** Called whenever a request finds the session gone (401), so the app can ask to sign in. */
let onSignedOut: () => void = () => undefined;

export function setCsrfToken(token: string | null): void {
  csrfToken = token;
}
export function whenSignedOut(callback: () => void): void {
  onSignedOut = callback;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

function withCsrf(init: RequestInit = {}): RequestInit {
  const headers = new Headers(init.headers);
  if (WRITES.has((init.method ?? 'GET').toUpperCase()) && csrfToken) {
    headers.set('X-CSRF-Token', csrfToken);
  }
  return { ...init, headers, credentials: 'same-origin' };
}

async function toError(response: Response): Promise<ApiError> {
  const body: unknown = await response.json().catch(() => null);
  const error = (body as { error?: { code?: string; message?: string } } | null)?.error;
  return new ApiError(
    response.status,
    error?.code ?? 'error',
    error?.message ?? `${response.status} ${response.statusText}`,
    body,
  );
}

const errors: Middleware = {
  onRequest({ request }) {
    if (WRITES.has(request.method) && csrfToken) request.headers.set('X-CSRF-Token', csrfToken);
    return request;
  },
  async onResponse({ response, request }) {
    if (response.ok) return response;
    if (response.status === 401 && !request.url.endsWith('/v1/session')) onSignedOut();
    throw await toError(response);
  },
};

/** The typed client: `api.GET('/v1/conversations', { params: { query } })`. */
export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });
api.use(errors);

/** The data of an answer the middleware let through (errors were thrown). */
export async function data<T>(call: Promise<{ data?: T }>): Promise<T> {
  return (await call).data as T;
}

/**
 * A request to a route the OpenAPI document does not describe yet (the sessions API being
 * built beside this app): untyped at the edge, typed by the caller. Move each to `api` once
 * the document has it.
 */
export async function request<T>(path: string, init: RequestInit & { json?: unknown } = {}) {
  const { json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (json !== undefined) headers.set('Content-Type', 'application/json');
  const response = await fetch(
    path,
    withCsrf({ ...rest, headers, body: json === undefined ? rest.body : JSON.stringify(json) }),
  );
  if (!response.ok) {
    if (response.status === 401 && path !== '/v1/session') onSignedOut();
    throw await toError(response);
  }
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}
