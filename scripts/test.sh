#!/usr/bin/env bash
# Installs what is missing, builds, and runs every CPU test (labels unit and e2e; gpu tests need
# the CUDA build, see docs/GPU.md). Usage: scripts/test.sh [preset] [extra ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
shift || true
bash scripts/build.sh "$preset"
ctest --test-dir "build/$preset" --label-exclude gpu --output-on-failure -j"$(nproc)" "$@"
