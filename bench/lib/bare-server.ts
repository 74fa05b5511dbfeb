/**
 * The baseline: a bare Fastify server with one route, `GET /contact`, answering a fixed JSON
 * body (BENCH_BARE_BODY, a real contact from the service). No auth, no database, no logging.
 * Run as a child of the harness (`node --import tsx bench/lib/bare-server.ts`): it prints
 * `{"port":N}` once listening on 127.0.0.1 and exits on SIGTERM/SIGINT or when its stdin
 * closes (the harness died).
 */
import Fastify from 'fastify';
import { serveAsChild } from './child-server.js';

const raw = process.env.BENCH_BARE_BODY;
if (!raw) {
  process.stderr.write('bare-server: BENCH_BARE_BODY is not set\n');
  process.exit(2);
}
const body: unknown = JSON.parse(raw);

const app = Fastify({ logger: false });
app.get('/contact', async () => body);

await app.ready();
serveAsChild(app.server, () => app.close());
