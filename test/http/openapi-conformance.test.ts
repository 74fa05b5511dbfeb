import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { installConformanceCheck, OpenApiConformance } from '../openapi-conformance.js';

const conformance = OpenApiConformance.fromFile();
const contact = {
  id: 'con_1',
  phone: '+14155550123',
  name: null,
  email: null,
  tags: [],
  lifecycle_stage: 'lead',
  custom_fields: {},
  identities: [],
  created_at: '2026-01-01T00:00:00.000Z',
  updated_at: '2026-01-01T00:00:00.000Z',
};
const json = { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'r1' };
const get = (status: number, body: unknown, headers: Record<string, string> = json) =>
  conformance.check({
    method: 'GET',
    route: '/v1/contacts/:id',
    status,
    headers,
    body: JSON.stringify(body),
  });

describe('the OpenAPI conformance check of the tests', () => {
  it('passes a response the document describes', () => {
    expect(get(200, contact)).toEqual([]);
    expect(get(404, { error: { code: 'not_found', message: 'no such contact' } })).toEqual([]);
  });

  it('names the operation, the status and the schema error of a body that does not match', () => {
    const [problem, ...rest] = get(200, { ...contact, lifecycle_stage: 'prospect' });
    expect(rest).toEqual([]);
    expect(problem).toMatch(/^GET \/v1\/contacts\/\{id\} \(getContact\) answered 200: /);
    expect(problem).toMatch(/lifecycle_stage/);
    expect(get(200, { id: 5 })[0]).toMatch(/must have required property/);
  });

  it('catches a status the operation does not document, and a missing required header', () => {
    expect(get(418, { error: { code: 'x', message: 'y' } })).toEqual([
      'GET /v1/contacts/{id} (getContact) answered 418: the status is not documented',
    ]);
    expect(get(200, contact, { 'content-type': 'application/json' })).toEqual([
      'GET /v1/contacts/{id} (getContact) answered 200: the required header X-Request-Id is missing',
    ]);
  });

  it('catches a route the document leaves out, and a body of another media type', () => {
    expect(
      conformance.check({
        method: 'GET',
        route: '/v1/nowhere',
        status: 200,
        headers: {},
        body: '',
      }),
    ).toEqual(['GET /v1/nowhere: the route is not in the document']);
    expect(get(200, contact, { ...json, 'content-type': 'text/plain' })[0]).toMatch(
      /Content-Type text\/plain is not one of application\/json/,
    );
  });

  it('checks every response of an app it is installed on', async () => {
    const app = Fastify();
    const problems: string[] = [];
    installConformanceCheck(app, { conformance, sink: (p) => problems.push(p) });
    app.get('/v1/contacts/:id', async (_req, reply) => {
      void reply.header('X-Request-Id', 'r1');
      return { id: 'con_1' };
    });
    await app.ready();
    expect((await app.inject({ url: '/v1/contacts/con_1' })).statusCode).toBe(200);
    await app.close();
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^GET \/v1\/contacts\/\{id\} \(getContact\) answered 200: the body does not match the schema: .*must have required property 'phone'/,
    );
  });
});
