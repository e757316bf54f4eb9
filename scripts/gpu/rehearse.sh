#!/usr/bin/env bash
# The GPU kit's CPU rehearsal, as CI runs it (ctest E2eGpuKit.CpuRehearsal, label e2e): packs the
# kit from a build (scripts/gpu/pack.sh) and runs every step of the three device calls on the CPU
# with tiny sizes (scripts/gpu/prove.sh --cpu --call all); fails unless all three tables are
# written without problems. About a minute on 2 cores.
#
# Usage: scripts/gpu/rehearse.sh [--build DIR] [--python PATH] [--dir DIR]
#   --build   the build whose binaries are packed (default build/torch2)
#   --python  the Python peer with torch, torchvision and pytorch-lightning (default
#             $SHOPLENS_PYTHON, else the venv of scripts/venv.sh)
#   --dir     where the kit, the scratch data and the results go (default BUILD/gpu-rehearsal)
# Exit status: 0 passed, 1 failed, 77 skipped (the Python has no pytorch_lightning or its torch is
# not the build's: the Debian 1.13 build), 2 usage error.
set -euo pipefail
# shellcheck source=../bench/lib/options.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib/options.sh"
cd "$(dirname "$0")/../.."
# shellcheck source=common.sh
source scripts/gpu/common.sh
build=build/torch2 python=${SHOPLENS_PYTHON:-} dir=""
parse_options 'build= python= dir=' "$@"
[[ -n $python ]] || python=$(bash scripts/venv.sh | tail -n 1)/bin/python
dir=${dir:-$build/gpu-rehearsal}
if ! "$python" -c 'import pytorch_lightning, torchvision' 2>/dev/null; then
  echo "rehearse.sh: skipped: $python cannot import pytorch_lightning and torchvision (the torch2 build's venv has them)"
  exit 77
fi
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
torch_root=$("$python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
if [[ $torch_dir != "$torch_root"* ]]; then
  echo "rehearse.sh: skipped: $build links the LibTorch at '$torch_dir', not $python's ($torch_root): the kit packs pip-torch builds"
  exit 77
fi
start=$SECONDS
replace_dir "$dir" .gpu-rehearsal
bash scripts/gpu/pack.sh --build "$build" --python "$python" --out "$dir/gpu-kit"
status=0
bash scripts/gpu/prove.sh --cpu --call all --kit "$dir/gpu-kit" --python "$python" --out "$dir/out" --work "$dir/work" ||
  status=$?
for n in 1 2 3; do
  [[ -s $dir/out/summary-call$n.md ]] || { echo "rehearse.sh: no table for call $n" >&2; status=1; }
done
echo "rehearse.sh: $([[ $status -eq 0 ]] && echo passed || echo FAILED) in $((SECONDS - start)) s; tables in $dir/out"
exit "$status"
