// `npm run build` runs this file: Vite builds the agent inbox into dist/app/, then the size of
// the JavaScript a first visit loads (the page's scripts and the modules they preload) is
// printed, gzipped, against the budget of docs/app.md.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'vite';

const CONFIG = fileURLToPath(new URL('./vite.config.ts', import.meta.url));
const OUT = fileURLToPath(new URL('../dist/app/', import.meta.url));
/** The initial JavaScript, gzipped, must stay under this many bytes. */
export const INITIAL_JS_BUDGET = 150 * 1024;

/** Builds the app into `outDir` (dist/app/ by default). */
export async function buildApp(outDir = OUT): Promise<void> {
  await build({ configFile: CONFIG, build: { outDir, emptyOutDir: true } });
}

/** The gzipped size of the JavaScript the built page loads before it can show anything. */
export async function initialJsSize(outDir = OUT): Promise<{ raw: number; gzipped: number }> {
  const html = await readFile(path.join(outDir, 'index.html'), 'utf8');
  const srcs = [
    ...html.matchAll(/<script[^>]+src="\/app\/([^"]+)"/g),
    ...html.matchAll(/<link[^>]+rel="modulepreload"[^>]+href="\/app\/([^"]+)"/g),
  ].map((m) => m[1]!);
  let raw = 0;
  let gzipped = 0;
  for (const src of new Set(srcs)) {
    const body = await readFile(path.join(outDir, src));
    raw += body.length;
    gzipped += gzipSync(body, { level: 9 }).length;
  }
  return { raw, gzipped };
}

async function main(): Promise<void> {
  await buildApp();
  const { raw, gzipped } = await initialJsSize();
  const kib = (n: number) => (n / 1024).toFixed(1);
  process.stdout.write(
    `app: dist/app initial JavaScript ${kib(raw)} KiB, ${kib(gzipped)} KiB gzipped (budget ${kib(INITIAL_JS_BUDGET)} KiB)\n`,
  );
  if (gzipped > INITIAL_JS_BUDGET) {
    process.stderr.write('app: the initial JavaScript is over its budget\n');
    process.exitCode = 1;
  }
}

if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  await main();
}
