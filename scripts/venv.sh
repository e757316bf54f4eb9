#!/usr/bin/env bash
# Creates (once) a pinned Python venv from scripts/python/requirements-NAME.txt:
#   torch2  pip's torch: its LibTorch is what the `torch2` build links, and its Python is the peer
#           of the 2.x benchmarks (several GB);
#   tools   the code checks of scripts/check_code.sh (lizard);
#   onnx    the ONNX checker and ONNX Runtime that the ONNX export tests compare against (small).
# Idempotent and cached per machine: the venv lives outside the checkout, keyed by the hash of the
# requirements file, so a fresh clone on the same machine reuses it. Prints the venv's path on the
# last line of stdout.
# Usage: scripts/venv.sh [torch2|tools|onnx]   (default torch2; SHOPLENS_VENV_DIR overrides the cache folder)
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:-torch2}"
req=scripts/python/requirements-$name.txt
[ -f "$req" ] || { echo "venv: no $req (known: torch2, tools, onnx)" >&2; exit 2; }
key=$(sha256sum "$req" | cut -c1-12)
root="${SHOPLENS_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shoplens}"
venv="$root/$name-$key"
if [ -f "$venv/.complete" ]; then
  echo "$venv"
  exit 0
fi
# Debian's python3 (needs python3-venv, installed by bootstrap); pyenv shims would tie the venv
# to a per-user interpreter.
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
echo "venv: creating $venv (cached afterwards)" >&2
rm -rf "$venv"
mkdir -p "$root"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
if [ "$name" = torch2 ]; then
  "$venv/bin/python" - >&2 <<'PY'
import torch
print(f"venv: torch {torch.__version__}, CUDA {torch.version.cuda}, cxx11 ABI {torch._C._GLIBCXX_USE_CXX11_ABI}")
PY
fi
touch "$venv/.complete"
echo "$venv"
