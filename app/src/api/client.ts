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
    const path = new URL(request.url).pathname;
    if (response.status === 401 && path !== '/v1/session' && path !== '/v1/invites/accept') {
      onSignedOut();
    }
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
