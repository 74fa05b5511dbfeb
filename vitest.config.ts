import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    // A poll that is not itself a timing check waits up to 5 s: on a loaded machine a browser
    // test's screen can take longer than the default second to change.
    expect: { poll: { timeout: 5_000 } },
    hookTimeout: 120_000,
  },
});
