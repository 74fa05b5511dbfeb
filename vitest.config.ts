import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Fails a test whose responses docs/openapi.json does not describe.
    setupFiles: ['test/setup.ts'],
    pool: 'forks',
    // Files run in parallel, each worker on a database of its own (test/global-setup.ts): two
    // workers even on a 2-core machine, as the tests wait on PostgreSQL and sockets more than
    // they compute; at most four, within the embedded server's connections.
    maxWorkers:
      Number(process.env.TEST_WORKERS) || Math.min(4, Math.max(2, availableParallelism() - 1)),
    testTimeout: 30_000,
    // A poll that is not itself a timing check waits up to 5 s: on a loaded machine a browser
    // test's screen can take longer than the default second to change.
    expect: { poll: { timeout: 5_000 } },
    hookTimeout: 120_000,
  },
});
