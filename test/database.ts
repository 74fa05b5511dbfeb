import { inject } from 'vitest';

/**
 * The database of this test file's worker: files of one worker run one after another on it, and
 * files of other workers run on their own (test/global-setup.ts).
 */
export function testDatabaseUrl(): string {
  const urls = inject('databaseUrls');
  const pool = Number(process.env.VITEST_POOL_ID ?? '1');
  return urls[(pool - 1) % urls.length]!;
}
