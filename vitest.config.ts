import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Several suites start real processes (git, codex app-server); two cores are all CI has.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
