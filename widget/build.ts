// The widget's build: how its sources become the one script GET /widget.js serves. `npm run
// build` runs this file, which writes the bundle to dist/widget/widget.js and prints its size;
// the service, run from its sources (development, tests), bundles it in memory with
// `bundleWidget` instead.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

/** The widget's entry point. */
const ENTRY = fileURLToPath(new URL('./widget.ts', import.meta.url));
/** Where `npm run build` writes the bundle (the service built to dist/ reads it from there). */
export const WIDGET_OUT = fileURLToPath(new URL('../dist/widget/widget.js', import.meta.url));

/** How the widget is bundled: one self-contained script, no imports at run time. */
const WIDGET_BUILD = {
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  legalComments: 'none',
} as const;

/** Bundles the widget into memory. */
export async function bundleWidget(outfile = 'widget.js'): Promise<Buffer> {
  const result = await esbuild.build({
    ...WIDGET_BUILD,
    target: [...WIDGET_BUILD.target],
    entryPoints: [ENTRY],
    write: false,
    outfile,
  });
  return Buffer.from(result.outputFiles[0]!.contents);
}

async function main(): Promise<void> {
  const body = await bundleWidget(WIDGET_OUT);
  await mkdir(path.dirname(WIDGET_OUT), { recursive: true });
  await writeFile(WIDGET_OUT, body);
  const gz = gzipSync(body, { level: 9 }).length;
  process.stdout.write(
    `widget: ${path.relative(process.cwd(), WIDGET_OUT)} ${(body.length / 1024).toFixed(1)} KiB, ${(gz / 1024).toFixed(1)} KiB gzipped\n`,
  );
}

if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  await main();
}
