#!/usr/bin/env bash
# Builds udp_batch.c (this folder) with AddressSanitizer + UBSan into a scratch file and drives it
# with asan-check.cjs; any memory error or undefined behaviour aborts with a report.
# Not part of npm test (docs/udp-engine.md). Needs gcc with libasan/libubsan and Node's headers.
set -euo pipefail
cd "$(dirname "$0")"
inc="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")/include/node"
out="$(mktemp -d)/udp_batch-asan.node"
gcc -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -shared -fPIC -I"$inc" \
  -DNODE_GYP_MODULE_NAME=udp_batch udp_batch.c -o "$out"
ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)" \
  node --expose-gc asan-check.cjs "$out"
rm -rf "$(dirname "$out")"
