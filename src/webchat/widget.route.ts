import type { FastifyInstance } from 'fastify';
import { widgetScript } from './widget-script.js';

/**
 * `GET /widget.js`: the webchat widget, for any site's script tag (the widget key it carries
 * decides what it may do). Gzipped when the browser accepts it; browsers keep it five minutes.
 */
export function widgetRoute(app: FastifyInstance): void {
  app.get('/widget.js', { schema: { hide: true } }, async (request, reply) => {
    const script = await widgetScript();
    const gzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
    reply
      .type('text/javascript; charset=utf-8')
      .header('Cache-Control', 'public, max-age=300')
      .header('Vary', 'Accept-Encoding')
      .header('Cross-Origin-Resource-Policy', 'cross-origin')
      .header('X-Content-Type-Options', 'nosniff');
    if (gzip) reply.header('Content-Encoding', 'gzip');
    return reply.send(gzip ? script.gzipped : script.body);
  });
}
