import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers.js';

describe('the API document names the service by PUBLIC_URL', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ config: { publicUrl: 'https://api.shop.example:8443' } });
  });
  afterAll(() => t.close());

  it('in GET /v1/openapi.json and in the document /docs tries requests against', async () => {
    for (const url of ['/v1/openapi.json', '/docs/json']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.json<{ servers: { url: string }[] }>().servers.map((s) => s.url)).toEqual([
        'https://api.shop.example:8443',
      ]);
    }
  });
});
