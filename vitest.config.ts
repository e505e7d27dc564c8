import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Test files share their worker's module cache (they still run one after another): loading the service's
    // modules again for each of 100 files took about 100 s of each CI phase. Each file builds its own app and
    // database (test/helpers.ts), and none changes process-wide state it does not restore.
    isolate: false,
  },
});
