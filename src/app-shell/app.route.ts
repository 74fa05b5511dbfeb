import type { FastifyInstance, FastifyReply } from 'fastify';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** The project root: this module is src/app-shell/app.route.ts, or dist/app-shell/ once built. */
const ROOT = new URL('../../', import.meta.url);
/** Where `npm run build` (app/build.ts) writes the agent inbox. */
export const APP_DIST = fileURLToPath(new URL('dist/app/', ROOT));

/**
 * The app's page may run only its own files and talk only to its own origin: no inline script,
 * no frame around it (clickjacking), no plugin. Images may be blobs (media read with the
 * session) and data: URLs (icons in the stylesheet).
 */
export const APP_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

interface AppFile {
  body: Buffer;
  gzipped: Buffer | null;
  type: string;
  /** Vite names what it builds under assets/ by content hash: such a file never changes. */
  immutable: boolean;
}

/** The built app, read once: a handful of files, small enough to keep in memory. */
async function loadApp(dir: string): Promise<Map<string, AppFile>> {
  const files = new Map<string, AppFile>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath, entry.name);
    const rel = path.relative(dir, full).split(path.sep).join('/');
    const body = await readFile(full);
    const type = TYPES[path.extname(rel)] ?? 'application/octet-stream';
    const compressible = /^(text\/|application\/json|image\/svg)/.test(type);
    files.set(rel, {
      body,
      gzipped: compressible && body.length > 512 ? gzipSync(body, { level: 9 }) : null,
      type,
      immutable: rel.startsWith('assets/'),
    });
  }
  return files;
}

/**
 * `GET /app` and every path under it: the agent inbox, a client of /v1 like any other (see
 * docs/app.md). Its built files are served as they are; any other path under /app answers the
 * page itself, so that a deep link (`/app/conversations/conv_…`) opens where it points. `GET /`
 * sends a browser to the app.
 */
export function appRoute(app: FastifyInstance, opts: { dir?: string } = {}): void {
  const dir = opts.dir ?? APP_DIST;
  let loading: Promise<Map<string, AppFile>> | null = null;
  const files = (): Promise<Map<string, AppFile>> => {
    loading ??= loadApp(dir).catch((err: unknown) => {
      loading = null;
      throw err;
    });
    return loading;
  };

  const send = (reply: FastifyReply, file: AppFile, gzip: boolean, isPage: boolean) => {
    reply
      .type(file.type)
      .header('X-Content-Type-Options', 'nosniff')
      .header('Vary', 'Accept-Encoding')
      .header('Cache-Control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    if (isPage) {
      reply
        .header('Content-Security-Policy', APP_CSP)
        .header('X-Frame-Options', 'DENY')
        .header('Referrer-Policy', 'same-origin')
        .header('Cross-Origin-Opener-Policy', 'same-origin');
    }
    if (gzip && file.gzipped) return reply.header('Content-Encoding', 'gzip').send(file.gzipped);
    return reply.send(file.body);
  };

  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/app', 302));

  const handler = async (
    request: { url: string; headers: Record<string, string | string[] | undefined> },
    reply: FastifyReply,
  ) => {
    let all: Map<string, AppFile>;
    try {
      all = await files();
    } catch {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The inbox is not built: run `npm run build`.\n');
    }
    const gzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
    const pathname = decodeSafely(request.url.split('?')[0]!.replace(/^\/app\/?/, ''));
    const asset = pathname !== null ? all.get(pathname) : undefined;
    if (asset && pathname !== 'index.html') return send(reply, asset, gzip, false);
    // A missing hashed file is a 404 (an old page asking for a script gone in a new build),
    // not the page in its place.
    if (pathname === null || pathname.startsWith('assets/')) {
      return reply.code(404).type('text/plain; charset=utf-8').send('Not found\n');
    }
    const page = all.get('index.html');
    if (!page) return reply.code(503).type('text/plain; charset=utf-8').send('No index.html\n');
    return send(reply, page, gzip, true);
  };
  app.get('/app', { schema: { hide: true } }, handler);
  app.get('/app/*', { schema: { hide: true } }, handler);
}

function decodeSafely(value: string): string | null {
  try {
    const decoded = decodeURIComponent(value);
    return decoded.includes('\0') || decoded.split('/').includes('..') ? null : decoded;
  } catch {
    return null;
  }
}
