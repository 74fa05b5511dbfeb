/** JSON over HTTP to the local service only; every call is bounded by a timeout. */

const LOCAL_HOST = '127.0.0.1';

export function assertLocal(url: string): void {
  const host = new URL(url).hostname;
  if (host !== LOCAL_HOST)
    throw new Error(`benchmark traffic must go to ${LOCAL_HOST}, not ${host}`);
}

export interface JsonResponse {
  status: number;
  body: unknown;
}

export async function requestJson(
  url: string,
  opts: { method?: string; token?: string; body?: unknown; timeoutMs?: number } = {},
): Promise<JsonResponse> {
  assertLocal(url);
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url, {
    method: opts.method ?? 'GET',
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    // not JSON: keep the text for the error message
  }
  return { status: res.status, body };
}

/** `requestJson`, failing unless the status is `expected`. */
export async function expectJson(
  expected: number,
  url: string,
  opts: Parameters<typeof requestJson>[1] = {},
): Promise<Record<string, unknown>> {
  const res = await requestJson(url, opts);
  if (res.status !== expected || typeof res.body !== 'object' || res.body === null) {
    throw new Error(
      `${opts.method ?? 'GET'} ${new URL(url).pathname}: expected ${expected}, got ${res.status} ${JSON.stringify(res.body).slice(0, 500)}`,
    );
  }
  return res.body as Record<string, unknown>;
}

export function stringField(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '') {
    throw new Error(`response has no string "${field}": ${JSON.stringify(body).slice(0, 500)}`);
  }
  return value;
}
