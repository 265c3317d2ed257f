// The vitest configuration Stryker runs (scripts/mutation.mjs): only the fast unit and model tests
// that cover the folder being mutated (MUTATION_TESTS, comma-separated globs), never e2e/chaos.
import { defineConfig } from 'vitest/config';

const include = (process.env.MUTATION_TESTS ?? '').split(',').filter(Boolean);
if (include.length === 0) throw new Error('MUTATION_TESTS is empty: run mutation testing through `npm run test:mutation`');

export default defineConfig({
  test: {
    include,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
