import { readFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';

/** The project root: this module is src/webchat/widget-script.ts, or dist/webchat/ once built. */
const ROOT = new URL('../../', import.meta.url);
/** The widget's build (widget/build.ts), which bundles its sources. */
const WIDGET_BUILD = new URL('widget/build.ts', ROOT);
/** Where `npm run build` writes the bundle, beside the compiled service. */
const BUILT = new URL('dist/widget/widget.js', ROOT);
/** Whether this module runs from the build (`npm start`) rather than from the sources. */
const FROM_DIST = import.meta.url.startsWith(new URL('dist/', ROOT).href);

export interface WidgetScript {
  body: Buffer;
  gzipped: Buffer;
}

let loading: Promise<WidgetScript> | null = null;

/**
 * The widget script: the bundle `npm run build` made when the service runs from its build, or
 * (running from the sources, as in development and tests) bundled once in memory with esbuild.
 */
export function widgetScript(): Promise<WidgetScript> {
  loading ??= load().catch((err: unknown) => {
    loading = null;
    throw err;
  });
  return loading;
}

async function load(): Promise<WidgetScript> {
  const body = FROM_DIST ? await readFile(BUILT) : await bundle();
  return { body, gzipped: gzipSync(body, { level: 9 }) };
}

/** Bundles the widget from its sources with its own build (esbuild, a development dependency). */
async function bundle(): Promise<Buffer> {
  const build = (await import(WIDGET_BUILD.href)) as { bundleWidget(): Promise<Buffer> };
  return build.bundleWidget();
}
