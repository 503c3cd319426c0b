import { defineConfig } from 'vitest/config';

// Each test file gets its own servers (started by test/harness), so files run in separate
// processes; two at a time keeps a 2-core machine responsive.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'e2e/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    globalSetup: ['test/harness/global-setup.ts'],
  },
});
