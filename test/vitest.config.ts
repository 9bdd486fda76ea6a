import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Files that load the machine: SIPp at hundreds of registrations a second, benchmarks,
 * fuzzers, floods, three-node fleets, worker restarts. They run one at a time in lane
 * "load"; files that mostly wait run in lane "wait"; everything else one at a time in
 * lane "rest"; the three side by side (README "Tests"): test/run-lanes.mjs starts one
 * vitest process per lane (`--project load|wait|rest`).
 * Two heavy files at once on a 2-core machine starved each other's UDP answers past
 * SIPp's timers; a heavy file beside a light one (unit, API, a few calls, timers that
 * wait) does not. Every file starts its own servers, Redis, rtpengine and SIPp on free
 * ports, so the two lanes share nothing.
 */
export const LOAD_FILES = [
  'test/integration/fleet-relay.test.ts',
  'test/integration/bench-smoke.test.ts',
  'test/integration/sipp-register.test.ts',
  'test/fuzz/server.fuzz.test.ts',
  'test/integration/workers-runtime.test.ts',
  'test/security/password-guessing.test.ts',
  'test/integration/redis-topologies.test.ts',
  'test/security/floods.test.ts',
  'test/integration/workers-store-process.test.ts',
  'test/integration/workers.test.ts',
  // Light files that balance the lanes (each lane runs its files one at a time): the
  // messaging API's own suite (two API servers, in-process) and call recording (one SIPp).
  'test/integration/messaging.test.ts',
  'test/integration/calls-recording.test.ts',
];

/**
 * Files whose time is mostly waiting (timers of the protocol: retries, expiries, idle
 * cuts, a 61 s call): lane "wait", beside the other two, costs little CPU.
 */
export const WAIT_FILES = [
  'test/integration/billing-calls.test.ts',
  'test/integration/callbacks-cdr.test.ts',
  'test/e2e/liveness.test.ts',
  'test/security/ws-idle.test.ts',
  'test/integration/flow-liveness.test.ts',
  'test/integration/frozen-flows.test.ts',
  'test/e2e/sipp.test.ts',
  'test/integration/registration-events.test.ts',
  'test/integration/crash-aliasing.test.ts',
  'test/integration/faults-redis.test.ts',
  'test/integration/fleet-udp-owner.test.ts',
  'test/integration/operability.test.ts',
  // Campaigns paced at 200 and 50 messages/s (docs/messaging-catalog.md).
  'test/integration/messaging-catalog.test.ts',
  'test/integration/messaging-campaign-server.test.ts',
];

/**
 * The platform's calls on the wire (numbers, trunks, KYC, push, billing across nodes):
 * project "platform", run in lane "wait" after its own files (a fourth lane beside "load"
 * made the load files' timing checks flaky on two cores; README "Tests"). Their API and
 * store suites are in "rest".
 */
export const PLATFORM_FILES = [
  'test/integration/trunks-calls.test.ts',
  'test/integration/numbers-api.test.ts',
  'test/integration/trunks-api.test.ts',
  'test/integration/billing-fleet.test.ts',
  'test/integration/kyc-calls.test.ts',
  'test/e2e/kyc-session-browser.test.ts',
  'test/integration/push.test.ts',
  'test/integration/push-fleet.test.ts',
];

const common = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
  poolOptions: { forks: { maxForks: 1, minForks: 1 } },
  fileParallelism: false,
};

export default defineConfig({
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    // test/.tmp holds scratch output of tests (screenshots, captures); never tests.
    exclude: ['test/.tmp/**', 'node_modules/**'],
    ...common,
    projects: [
      { extends: true, test: { name: 'load', include: LOAD_FILES } },
      { extends: true, test: { name: 'wait', include: WAIT_FILES } },
      { extends: true, test: { name: 'platform', include: PLATFORM_FILES } },
      {
        extends: true,
        test: { name: 'rest', include: ['test/**/*.test.ts'], exclude: ['test/.tmp/**', 'node_modules/**', 'test/unit/**', 'test/conformance/**', ...LOAD_FILES, ...WAIT_FILES, ...PLATFORM_FILES] },
      },
      // Pure unit and conformance files (no servers, no sockets) share one worker without
      // re-importing modules per file (isolate: false): 22 s → 8 s. Run in lane "rest".
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts', 'test/conformance/**/*.test.ts'], poolOptions: { forks: { isolate: false, singleFork: true } } },
      },
    ],
  },
});
