import { defineConfig } from 'vitest/config';

/**
 * The store's contract, which every engine passes: the `store-on-postgres` project runs it once more
 * on the SQL store against a throwaway PostgreSQL (CCWEB_TEST_STORE_ENGINE=postgres;
 * test/support/store-helpers.ts).
 */
const STORE_CONTRACT = ['test/unit/store.test.ts', 'test/unit/store-leases.test.ts'];

/**
 * The earlier PostgreSQL engine (a journal replica on every node) against the same contract and its
 * journal's own tests, while it still serves several nodes.
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
          include: STORE_CONTRACT,
          env: { CCWEB_TEST_STORE_ENGINE: 'postgres' },
          testTimeout: 240_000,
          globalSetup: ['test/support/postgres-global-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'store-replica-on-postgres',
          include: STORE_CONFORMANCE,
          env: { CCWEB_TEST_STORE_ENGINE: 'postgres-replica' },
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
          name: 'store-replica-on-postgres-many-writers',
          include: STORE_CONFORMANCE,
          env: { CCWEB_TEST_STORE_ENGINE: 'postgres-replica', CCWEB_TEST_STORE_WRITERS: 'many' },
          testTimeout: 240_000,
          globalSetup: ['test/support/postgres-global-setup.ts'],
        },
      },
    ],
  },
});
