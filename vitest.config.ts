import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Marks every process the run starts and fails the run if one outlives it.
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Several suites start real processes (git, codex app-server); two cores are all CI has.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
