#!/usr/bin/env bash
# The quick tour on the embedded default data: installs what is missing, builds, generates a
# synthetic catalog, prepares it into shards, runs the training loader over them, and says
# where everything is. Usage: scripts/demo.sh [output folder, default demo/]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-demo}"
bash scripts/build.sh release
bin=build/release/bin/shoplens
mkdir -p "$out"

echo "== 1/3 make-data: a synthetic catalog of 600 product photos, 12 defect classes"
"$bin" make-data --out "$out/catalog" --num-images 600 --image-size-range 200:480 --seed 7

echo "== 2/3 prepare: decode, validate, quarantine, pack into shards"
"$bin" prepare --config configs/demo.json --input "$out/catalog/manifest.csv" --out "$out/shards"

echo "== 3/3 load: the training loader with augmentation, two epochs"
"$bin" load --config configs/demo.json --shards "$out/shards" --epochs 2 \
  --out "$out/load" --preview "$out/load/augmented.png" > "$out/load.json"

cat <<MSG

Demo finished. Results:
  catalog (images + manifest.csv):   $out/catalog
  shards, dataset.json, report.md:   $out/shards
  quarantined rows with reasons:     $out/shards/quarantine.csv
  loader throughput (load.json):     $out/load/load.json
  augmented batch preview:           $out/load/augmented.png
MSG
