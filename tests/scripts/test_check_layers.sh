#!/usr/bin/env bash
# Tests scripts/check_layers.py, the layering check of scripts/check_code.sh: this checkout passes;
# on small planted trees an include that points up, one between peers, one of an unknown layer and
# a private header of a higher layer fail naming the file, line and both layers; includes that
# point down, within a layer and along an allowed sideways edge pass. Needs no build.
# ctest Scripts.Layers (label unit); alone: bash tests/scripts/test_check_layers.sh
# shellcheck source=harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

# check WHAT TREE EXPECTED_RC [EXPECTED_TEXT]: runs the check on TREE
check() {
  local out rc named=yes
  out=$(/usr/bin/python3 "$root/scripts/check_layers.py" "$2" 2>&1)
  rc=$?
  [[ $# -lt 4 || $out == *"$4"* ]] || named="no: $out"
  expect "$1: exit" "$3" "$rc"
  expect "$1: names the file, line and layers" yes "$named"
}

# plant TREE FILE INCLUDE...: writes FILE under TREE with those includes
plant() {
  local tree=$1 file=$2
  shift 2
  mkdir -p "$(dirname "$tree/$file")"
  for header in "$@"; do printf '#include "%s"\n' "$header"; done > "$tree/$file"
}

# A clean tree: includes down, within a layer (a private header), along infer -> train/checkpoint.h.
base() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t"
  plant "$tmp/t" include/shoplens/core/errors.h
  plant "$tmp/t" include/shoplens/data/batch.h "shoplens/core/errors.h"
  plant "$tmp/t" include/shoplens/train/checkpoint.h "shoplens/data/batch.h"
  plant "$tmp/t" include/shoplens/jobs/train_job.h "shoplens/train/checkpoint.h"
  plant "$tmp/t" src/serve/framing.h "shoplens/core/errors.h"
  plant "$tmp/t" src/serve/frontend.cpp "serve/framing.h"
  plant "$tmp/t" src/infer/export.cpp "shoplens/train/checkpoint.h" "shoplens/core/errors.h"
  plant "$tmp/t" tools/shoplens/cmd_x.cpp "shoplens/jobs/train_job.h" "serve/framing.h"
}

# violation WHAT EXPECTED_TEXT FILE INCLUDE...: the clean tree plus FILE fails naming EXPECTED_TEXT
violation() {
  local what=$1 text=$2
  shift 2
  base
  plant "$tmp/t" "$@"
  check "$what" "$tmp/t" 1 "$text"
}

check "this checkout" "$root" 0
base
check "a clean tree" "$tmp/t" 0
violation "models including infer" \
  "src/models/emit.h:2: models (level 1) includes infer/onnx_graph.h of infer (level 2), a layer above it" \
  src/models/emit.h "shoplens/core/errors.h" "shoplens/infer/onnx_graph.h"
violation "core including train" "include/shoplens/core/config.h:1: core (level 0) includes train/" \
  include/shoplens/core/config.h "shoplens/train/checkpoint.h"
violation "a peer without an allowed edge" "train (level 2) includes infer/export.h of infer (level 2), a peer" \
  src/train/loop.cpp "shoplens/infer/export.h"
violation "a private header of a higher layer" "src/jobs/job.cpp:1: jobs (level 4) includes serve/framing.h" \
  src/jobs/job.cpp "serve/framing.h"
violation "an unknown layer" "includes 'extras/thing.h' of 'extras', which is no layer" \
  src/data/reader.cpp "shoplens/extras/thing.h"
violation "a file outside every layer" "src/extras/thing.cpp: in folder 'extras', which is no layer" \
  src/extras/thing.cpp "shoplens/core/errors.h"

finish test_check_layers
