import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** The widget's entry point, relative to this module (in src) or its build (in dist). */
const ENTRY = new URL('./widget/widget.ts', import.meta.url);
/** Where `npm run build` writes the bundle, next to this module's build. */
export const BUILT = new URL('./widget.js', import.meta.url);

/** How the widget is bundled: one self-contained script, no imports at run time. */
export const WIDGET_BUILD = {
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  legalComments: 'none',
} as const;

export interface WidgetScript {
  body: Buffer;
  gzipped: Buffer;
}

let loading: Promise<WidgetScript> | null = null;

/**
 * The widget script: the bundle `npm run build` made, or (running from the sources, as in
 * development and tests) bundled once in memory with esbuild.
 */
export function widgetScript(): Promise<WidgetScript> {
  loading ??= load().catch((err: unknown) => {
    loading = null;
    throw err;
  });
  return loading;
}

async function load(): Promise<WidgetScript> {
  let body: Buffer;
  try {
    body = await readFile(BUILT);
  } catch {
    body = await bundle();
  }
  return { body, gzipped: gzipSync(body, { level: 9 }) };
}

/** Bundles the widget with esbuild (a development dependency) into memory. */
export async function bundle(outfile?: string): Promise<Buffer> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    ...WIDGET_BUILD,
    target: [...WIDGET_BUILD.target],
    entryPoints: [fileURLToPath(ENTRY)],
    write: false,
    outfile: outfile ?? 'widget.js',
  });
  return Buffer.from(result.outputFiles[0]!.contents);
}
