#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (as root), then the npm packages.
# Debian packages only when missing: redis-server (real Redis for store tests), sip-tester (SIPp),
# openssl (development certificate), chromium (headless browser of test/e2e/browser.test.ts),
# baresip (the softphone of test/e2e/softphone.test.ts; without recommends: no GUI or video modules),
# iproute2 (`ip netns`, `tc`: the network namespace of test/integration/flow-liveness.test.ts).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v sipp >/dev/null 2>&1 || need+=(sip-tester)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/baresip ] || need+=(baresip)
{ command -v ip && command -v tc; } >/dev/null 2>&1 || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# redis-server from apt starts a system service on 6379; the tests start their own on free ports.
npm ci --no-audit --no-fund
