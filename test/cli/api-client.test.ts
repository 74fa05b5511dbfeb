import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../src/cli/api-client.js';
import { CliError } from '../../src/cli/common.js';

// A stand-in for the service: the first request is refused with 429 and Retry-After: 1.
describe('the CLI client of the API', () => {
  let server: http.Server;
  let base: string;
  const seen: { at: number; auth?: string }[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.push({ at: Date.now(), auth: req.headers.authorization });
      res.setHeader('content-type', 'application/json');
      if (req.url === '/busy' && seen.length === 1) {
        res.writeHead(429, { 'retry-after': '1' });
        res.end(JSON.stringify({ error: { code: 'rate_limited', message: 'slow down' } }));
      } else if (req.url === '/busy') {
        res.end(JSON.stringify({ ok: true }));
      } else {
        res.writeHead(401);
        res.end(JSON.stringify({ error: { code: 'unauthorized', message: 'invalid API key' } }));
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('waits out a 429 for its Retry-After, then carries on; a refused key says what to set', async () => {
    const said: string[] = [];
    const api = new Api(base, 'sb_live_k', (l) => said.push(l));
    await expect(api.get('/busy')).resolves.toEqual({ ok: true });
    expect(seen).toHaveLength(2);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(950);
    expect(seen[0]!.auth).toBe('Bearer sb_live_k');
    expect(said.join('\n')).toContain('wait 1 s');
    await expect(api.get('/other')).rejects.toThrow(/API key was refused.*SWITCHBOARD_API_KEY/);
    await expect(api.get('/other')).rejects.toBeInstanceOf(CliError);
  });

  it('names the address it cannot reach', async () => {
    const api = new Api('http://127.0.0.1:1', 'k', () => {});
    await expect(api.get('/v1/contacts')).rejects.toThrow(
      /cannot reach the service at http:\/\/127\.0\.0\.1:1/,
    );
  });
});
