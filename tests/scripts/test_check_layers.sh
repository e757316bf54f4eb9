#!/usr/bin/env bash
# Tests scripts/check_layers.py, the layering check of scripts/check_code.sh: this checkout passes;
# on small planted trees an include that points up, one between peers, one of an unknown layer and
# a private header of a higher layer fail naming the file, line and both layers; includes that
# point down, within a layer and along an allowed sideways edge pass. Needs no build.
# ctest Scripts.Layers (label unit); alone: bash tests/scripts/test_check_layers.sh
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checks=0 failures=0

# check WHAT TREE EXPECTED_RC [EXPECTED_TEXT]: runs the check on TREE
check() {
  checks=$((checks + 1))
  local out rc
  out=$(/usr/bin/python3 "$root/scripts/check_layers.py" "$2" 2>&1)
  rc=$?
  if [[ $rc != "$3" || ($# -ge 4 && $out != *"$4"*) ]]; then
    failures=$((failures + 1))
    printf 'FAIL %s: exit %s (expected %s)\n%s\n' "$1" "$rc" "$3" "$out"
  fi
}

# plant TREE FILE INCLUDE...: writes FILE under TREE with those includes
plant() {
  local tree=$1 file=$2
  shift 2
  mkdir -p "$(dirname "$tree/$file")"
  for header in "$@"; do printf '#include "%s"\n' "$header"; done > "$tree/$file"
}

check "this checkout" "$root" 0

base() {  # a clean tree: core, data, train and infer headers that include down
  rm -rf "$tmp/t" && mkdir -p "$tmp/t"
  plant "$tmp/t" include/shoplens/core/errors.h
  plant "$tmp/t" include/shoplens/data/batch.h "shoplens/core/errors.h"
  plant "$tmp/t" include/shoplens/train/checkpoint.h "shoplens/data/batch.h"
  plant "$tmp/t" include/shoplens/jobs/train_job.h "shoplens/train/checkpoint.h"
  plant "$tmp/t" src/serve/framing.h "shoplens/core/errors.h"
  plant "$tmp/t" src/infer/export.cpp "shoplens/train/checkpoint.h" "shoplens/core/errors.h"
  plant "$tmp/t" tools/shoplens/cmd_x.cpp "shoplens/jobs/train_job.h" "serve/framing.h"
}

base
check "a clean tree" "$tmp/t" 0

base
plant "$tmp/t" src/models/emit.h "shoplens/core/errors.h" "shoplens/infer/onnx_graph.h"
check "models including infer" "$tmp/t" 1 \
  "src/models/emit.h:2: models (level 1) includes infer/onnx_graph.h of infer (level 2), a layer above it"

base
plant "$tmp/t" include/shoplens/core/config.h "shoplens/train/checkpoint.h"
check "core including train" "$tmp/t" 1 "include/shoplens/core/config.h:1: core (level 0) includes train/"

base
plant "$tmp/t" src/train/loop.cpp "shoplens/infer/export.h"
check "a peer without an allowed edge" "$tmp/t" 1 "train (level 2) includes infer/export.h of infer (level 2), a peer"

base
plant "$tmp/t" src/jobs/job.cpp "serve/framing.h"
check "a private header of a higher layer" "$tmp/t" 1 "src/jobs/job.cpp:1: jobs (level 4) includes serve/framing.h"

base
plant "$tmp/t" src/data/reader.cpp "shoplens/extras/thing.h"
check "an unknown layer" "$tmp/t" 1 "includes 'extras/thing.h' of 'extras', which is no layer"

base
plant "$tmp/t" src/extras/thing.cpp "shoplens/core/errors.h"
check "a file outside every layer" "$tmp/t" 1 "src/extras/thing.cpp: in folder 'extras', which is no layer"

echo "test_check_layers: $checks checks, $failures failures"
[[ $failures == 0 ]]
