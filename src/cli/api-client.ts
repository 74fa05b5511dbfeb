/** The public API over HTTP, as the CLI's commands that act as a client call it. */

import { CliError } from './common.js';

interface ApiError {
  error?: { code?: string; message?: string };
}

export interface Page<T> {
  data: T[];
  total: number;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The API over HTTP with a key: JSON in and out, waiting out 429 and 503 as they ask. */
export class Api {
  constructor(
    readonly base: string,
    private readonly key: string,
    private readonly say: (line: string) => void,
  ) {}

  async call<T>(
    method: string,
    path: string,
    body?: unknown,
    opts: { bearer?: string | null; origin?: string; allow?: number[] } = {},
  ): Promise<{ status: number; body: T }> {
    for (let attempt = 1; ; attempt++) {
      // `bearer`: another token than the key (a web chat visitor's), or null for none.
      const bearer = opts.bearer === undefined ? this.key : opts.bearer;
      const headers: Record<string, string> = {};
      if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (opts.origin !== undefined) headers.origin = opts.origin;
      let res: Response;
      try {
        res = await fetch(`${this.base}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (err) {
        const c = (err as { cause?: { code?: string; message?: string } }).cause;
        const cause = c?.code ?? c?.message ?? String(err);
        throw new CliError(
          `cannot reach the service at ${this.base} (${cause}): start it with \`npm start\`, or give its address with --url`,
        );
      }
      const text = await res.text();
      let parsed: T & ApiError;
      try {
        parsed = (text === '' ? null : JSON.parse(text)) as T & ApiError;
      } catch {
        throw new CliError(
          `${method} ${path} answered ${res.status} with something else than JSON: is ${this.base} Switchboard?`,
        );
      }
      if ((res.status === 429 || res.status === 503) && attempt < 20) {
        const wait = Math.min(Number(res.headers.get('retry-after') ?? '1') || 1, 60);
        this.say(
          `  (the service asked to wait ${wait} s: ${parsed?.error?.message ?? res.status})`,
        );
        await sleep(wait * 1000);
        continue;
      }
      if (res.ok || opts.allow?.includes(res.status)) return { status: res.status, body: parsed };
      const what = parsed?.error?.message ?? text.slice(0, 200);
      if (res.status === 401)
        throw new CliError(`the API key was refused (${what}): set SWITCHBOARD_API_KEY`);
      throw new CliError(`${method} ${path} answered ${res.status}: ${what}`);
    }
  }

  async get<T>(path: string): Promise<T> {
    return (await this.call<T>('GET', path)).body;
  }

  async post<T>(path: string, body: unknown = {}): Promise<T> {
    return (await this.call<T>('POST', path, body)).body;
  }

  /** Every item of a list (pages of 100), up to `max`. */
  async all<T>(path: string, max = 2000): Promise<T[]> {
    const items: T[] = [];
    const sep = path.includes('?') ? '&' : '?';
    for (let page = 1; items.length < max; page++) {
      const got = await this.get<Page<T>>(`${path}${sep}limit=100&page=${page}`);
      items.push(...got.data);
      if (got.data.length < 100) break;
    }
    return items;
  }
}
