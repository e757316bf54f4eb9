#!/usr/bin/env bash
# Idempotent install of every Debian package ShopLens needs to build, test and benchmark.
# Safe to re-run: it only calls apt when something is missing.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # LibTorch (CPU) and the c10d Gloo headers it includes
  libtorch-dev libgloo-dev
  # fast BLAS instead of Debian's reference one
  libopenblas0-pthread libopenblas-dev
  # image I/O
  libopencv-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libtiff-dev
  # CLI, logging, JSON, tests
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev googletest
  # HTTP server for `shoplens serve` (header-only)
  libcpp-httplib-dev
  # libFuzzer targets; format and static checks (scripts/check_code.sh, scripts/tidy.sh)
  clang libclang-rt-14-dev clang-format clang-tidy shellcheck
  # the Python peer for side-by-side benchmarks and weight-compatibility fixtures
  python3 python3-venv python3-torch python3-torchvision python3-pil python3-numpy
  # scikit-learn: the reference the binary metrics (ROC AUC, average precision) are checked against
  python3-sklearn
  # PyYAML: the example CI workflows (scripts/ci-examples) are checked as YAML
  python3-yaml
  # multi-node tests: network namespaces and a veth link (scripts/netns), a local Slurm cluster
  # with munge authentication (scripts/slurm)
  iproute2 munge slurmctld slurmd slurm-client
  # a real browser, headless: the HTML reports are rendered and their charts measured in tests
  chromium
  # the README tour (scripts/readme_tour.sh) talks to `serve` with curl
  curl
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "bootstrap: done"
