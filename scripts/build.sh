#!/usr/bin/env bash
# Configures and builds ShopLens (Ninja, ccache, precompiled headers). Usage: scripts/build.sh [preset]
# Presets: release (default), debug-asan. Prints the build time.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
bash scripts/bootstrap.sh
start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -- -j"$(nproc)"
echo "build ($preset) took $(( $(date +%s) - start )) s; binary: build/$preset/bin/shoplens"
