// Writes (or, with --check, verifies) docs/openapi.json from the route schemas.
import { readFile, writeFile } from 'node:fs/promises';
import { buildApp } from '../src/app.js';
import { systemClock } from '../src/clock.js';
import { loadConfig } from '../src/config.js';
import { createDb } from '../src/db/database.js';
import { MemoryRateLimiter } from '../src/http/rate-limiter.js';

const target = new URL('../docs/openapi.json', import.meta.url);
// The pool connects lazily; generating the document never touches a database.
const db = createDb('postgres://unused@127.0.0.1:1/unused');
const { app } = await buildApp({
  config: { ...loadConfig({}), adminToken: 'document-the-admin-api', logLevel: 'silent' },
  db,
  rateLimiter: new MemoryRateLimiter(),
  clock: systemClock,
});
await app.ready();
const doc = `${JSON.stringify(app.swagger(), null, 2)}\n`;
await app.close();
await db.destroy();

if (process.argv.includes('--check')) {
  const current = await readFile(target, 'utf8').catch(() => '');
  if (current !== doc) {
    process.stderr.write('docs/openapi.json is out of date: run `npm run openapi`\n');
    process.exit(1);
  }
  process.stdout.write('docs/openapi.json is up to date\n');
} else {
  await writeFile(target, doc);
  process.stdout.write('wrote docs/openapi.json\n');
}
