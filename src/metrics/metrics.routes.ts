import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../clock.js';
import type { Db } from '../db/database.js';
import { Unauthorized } from '../errors.js';
import type { Metrics } from './metrics.js';
import { readQueueStats, type QueueStats } from './queue-stats.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Times every response, whatever route answered it (404s and errors included). */
export function installRequestMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeRequest(
      request.routeOptions.url,
      request.method,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });
}

/**
 * `GET /metrics`, Prometheus text format. Outside /v1 and its API keys; behind
 * `Authorization: Bearer <METRICS_TOKEN>` when a token is configured.
 */
export function metricsRoutes(
  app: FastifyInstance,
  deps: {
    metrics: Metrics;
    db: Db;
    clock: Clock;
    token: string | null;
    jobKinds: readonly string[];
  },
): void {
  const expected = deps.token === null ? null : digest(deps.token);
  app.get(
    '/metrics',
    {
      schema: { hide: true },
      onRequest: async (request) => {
        if (expected === null) return;
        const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
        // Comparing digests keeps the check constant-time whatever the token's length.
        if (!match || !timingSafeEqual(digest(match[1]!), expected))
          throw new Unauthorized('metrics token missing or invalid');
      },
    },
    async (request, reply) => {
      let queues: QueueStats | null = null;
      try {
        queues = await readQueueStats(deps.db, deps.clock.now(), deps.jobKinds);
      } catch (err) {
        // The process's own figures matter most while the database is down: serve them, and
        // leave the queue gauges out rather than report stale depths.
        request.log.warn({ err }, 'metrics: reading the queues failed');
      }
      const text = await deps.metrics.expose(queues);
      return reply.type(deps.metrics.contentType).send(text);
    },
  );
}
