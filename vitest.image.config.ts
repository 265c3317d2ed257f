// `npm run test:image` only (scripts/test-image/run.sh): the container image end to end. Not in `npm test`
// (its files end in .e2e.ts, outside vitest.config.ts's include): it builds an image, ≈ see README "Tests".
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/image/**/*.e2e.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 300_000,
    hookTimeout: 600_000,
    maxWorkers: 1,
    reporters: ['default'],
  },
});
