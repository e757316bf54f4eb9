#!/usr/bin/env bash
# Configures and builds ShopLens (Ninja, ccache, precompiled headers). Usage: scripts/build.sh [preset]
# Presets: release (default; Debian's LibTorch 1.13), torch2 (pip's torch 2.x from the venv that
# scripts/venv.sh makes, CUDA code compiled and linked), debug-asan. Prints the build time.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
bash scripts/bootstrap.sh
if [ "$preset" = torch2 ]; then
  SHOPLENS_VENV=$(bash scripts/venv.sh | tail -n 1)
  SHOPLENS_TORCH_CMAKE_PREFIX=$("$SHOPLENS_VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  export SHOPLENS_VENV SHOPLENS_TORCH_CMAKE_PREFIX
fi
start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -- -j"$(nproc)"
echo "build ($preset) took $(( $(date +%s) - start )) s; binary: build/$preset/bin/shoplens"
