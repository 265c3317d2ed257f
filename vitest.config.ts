import { defineConfig } from 'vitest/config';

/**
 * The store's contract, which every engine passes: the `store-on-postgres` project runs it once more
 * on the SQL store against a throwaway PostgreSQL (CCWEB_TEST_STORE_ENGINE=postgres;
 * test/support/store-helpers.ts).
 */
const STORE_CONTRACT = ['test/unit/store.test.ts', 'test/unit/store-leases.test.ts', 'test/unit/store-claims.test.ts'];

export default defineConfig({
  test: {
    // Marks every process the run starts and fails the run if one outlives it.
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Several suites start real processes (git, codex app-server); two cores are all CI has.
    maxWorkers: 2,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'store-on-postgres',
          include: STORE_CONTRACT,
          env: { CCWEB_TEST_STORE_ENGINE: 'postgres' },
          testTimeout: 240_000,
          globalSetup: ['test/support/postgres-global-setup.ts'],
        },
      },
    ],
  },
});
