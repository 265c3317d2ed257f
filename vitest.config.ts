import { defineConfig } from 'vitest/config';

/**
 * The store tests that run on both engines: the contract, its cold tier, derived records,
 * fresh inserts and compaction. The `store-on-postgres` project runs them once more against a
 * throwaway PostgreSQL (CCWEB_TEST_STORE_ENGINE=postgres; test/support/store-helpers.ts); tests that
 * are about the embedded store's own files say so and run on it only.
 */
const STORE_CONFORMANCE = [
  'test/unit/store.test.ts',
  'test/unit/store-journal.test.ts',
  'test/unit/store-cold.test.ts',
  'test/unit/store-derived.test.ts',
  'test/unit/store-fresh-insert.test.ts',
  'test/unit/store-compaction-handover.test.ts',
];

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
          include: STORE_CONFORMANCE,
          env: { CCWEB_TEST_STORE_ENGINE: 'postgres' },
          // Every commit is a round trip to PostgreSQL: the random workloads of thousands of
          // transactions take a few times longer than on the embedded store (54–61 s under load).
          testTimeout: 240_000,
          globalSetup: ['test/support/postgres-global-setup.ts'],
        },
      },
      {
        // The same contract once more with the store sharing the writes with other nodes (`writers:
        // 'many'`): every body runs under the cluster's commit lock, later than its call.
        extends: true,
        test: {
          name: 'store-on-postgres-many-writers',
          include: STORE_CONFORMANCE,
          env: { CCWEB_TEST_STORE_ENGINE: 'postgres', CCWEB_TEST_STORE_WRITERS: 'many' },
          testTimeout: 240_000,
          globalSetup: ['test/support/postgres-global-setup.ts'],
        },
      },
    ],
  },
});
