// `npm run test:image` (scripts/test-image/run.sh: the container image end to end) and `npm run test:install`
// (CCWEB_IMAGE_TEST_FILE=test/image/install-steps.e2e.ts: the guide's install steps on a fresh Debian). Not in
// `npm test`: their files end in .e2e.ts, outside vitest.config.ts's include; durations in docs/testing.md.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [process.env['CCWEB_IMAGE_TEST_FILE'] ?? 'test/image/image.e2e.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 300_000,
    hookTimeout: 600_000,
    maxWorkers: 1,
    reporters: ['default'],
  },
});
