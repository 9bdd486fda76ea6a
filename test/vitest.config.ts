import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    include: ['test/**/*.test.ts'],
    // test/.tmp holds scratch output of tests (screenshots, captures); never tests.
    exclude: ['test/.tmp/**', 'node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One test file at a time. Many files start real servers, Redis clusters, SIPp fleets,
    // rtpengine and Chromium; two at once on a 2-core machine starved each other's UDP
    // answers past SIPp's timers often enough to fail a different file in most clean runs.
    // Serial, the suite takes about 10 minutes (the budget is 20).
    poolOptions: { forks: { maxForks: 1, minForks: 1 } },
    fileParallelism: false,
  },
});
