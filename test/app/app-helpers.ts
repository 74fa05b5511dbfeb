import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { buildApp } from '../../app/build.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const APP_SOURCES = path.join(ROOT, 'app');
const BUILT_PAGE = path.join(ROOT, 'dist/app/index.html');

async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, (await stat(path.join(entry.parentPath, entry.name))).mtimeMs);
  }
  return newest;
}

/**
 * The app as `npm run build` makes it (GET /app serves dist/app): built here when missing or
 * older than its sources, so a test run never tests a stale app. One build serves every file.
 */
export async function ensureAppBuilt(): Promise<void> {
  const built = await stat(BUILT_PAGE).then(
    (s) => s.mtimeMs,
    () => 0,
  );
  if (built === 0 || (await newestSource(APP_SOURCES)) > built) await buildApp();
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function axeViolations(page: Page): Promise<string[]> {
  const source = path.join(ROOT, 'node_modules/axe-core/axe.min.js');
  // The page's CSP allows only its own scripts: axe goes in through the test's own channel.
  await page.addScriptTag({ path: source }).catch(async () => {
    const { readFile } = await import('node:fs/promises');
    await page.evaluate(await readFile(source, 'utf8'));
  });
  const results = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } })
      .axe;
    return axe.run();
  });
  return (
    results.violations as {
      id: string;
      impact: string;
      help: string;
      nodes: { target: unknown }[];
    }[]
  )
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${JSON.stringify(v.nodes.map((n) => n.target))})`);
}
