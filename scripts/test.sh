#!/usr/bin/env bash
# Installs what is missing, runs the code checks (scripts/check_code.sh: function length, format),
# clang-tidy on the files changed since .ci/tidy-base (scripts/tidy.sh), builds, and runs every
# CPU test (ctest labels unit and e2e; `gpu` tests are built, and run on a GPU machine: docs/GPU.md).
# Usage: scripts/test.sh                         both LibTorch versions: release (Debian's 1.13)
#                                                then torch2 (pip's torch 2.11, CUDA code compiled),
#                                                then the whole CPU suite under ASan+UBSan
#                                                (debug-asan)
#        scripts/test.sh PRESET [ctest args...]  one preset: release, torch2 or debug-asan
# Prints each phase's wall time; exits non-zero when any phase fails.
set -euo pipefail
cd "$(dirname "$0")/.."

run_preset() {
  local preset=$1
  shift
  local start=$SECONDS
  bash scripts/build.sh "$preset"
  ctest --test-dir "build/$preset" --label-exclude gpu --output-on-failure --timeout 600 -j"$(nproc)" "$@"
  echo "test.sh: $preset built and tested in $(( SECONDS - start )) s"
}

if [ $# -gt 0 ]; then
  run_preset "$@"
  exit 0
fi
total=$SECONDS
bash scripts/check_code.sh
run_preset release
bash scripts/tidy.sh  # needs the release build's compile commands
run_preset torch2
# Memory errors and undefined behaviour: the whole CPU suite under ASan+UBSan, where any report
# fails the test: the unit suite (parsers, shards, loader, micro-batcher, HTTP front end, fuzz
# targets), then every e2e suite (the real binary on real files, hostile and damaged ones
# included: image decoding, shards, the unpickler, the HTTP server, model cards).
run_preset debug-asan
echo "test.sh: both LibTorch versions and the sanitizer suite green in $(( SECONDS - total )) s"
