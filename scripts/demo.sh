#!/usr/bin/env bash
# The quick tour on the embedded default data: installs what is missing, builds, generates a
# synthetic catalog, prepares it into shards, runs the training loader over them, and says
# where everything is.
# It then trains the baseline CNN on the shards and evaluates it on the test split, and ends with
# the batch-size study (baseline vs find-batch) and its report. Usage: scripts/demo.sh [output folder, default demo/]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-demo}"
bash scripts/build.sh release
bin=build/release/bin/shoplens
mkdir -p "$out"

echo "== 1/5 make-data: a synthetic catalog of 600 product photos, 12 defect classes"
"$bin" make-data --out "$out/catalog" --num-images 600 --image-size-range 200:480 --seed 7

echo "== 2/5 prepare: decode, validate, quarantine, pack into shards"
"$bin" prepare --config configs/demo.json --input "$out/catalog/manifest.csv" --out "$out/shards"

echo "== 3/5 load: the training loader with augmentation, two epochs"
"$bin" load --config configs/demo.json --shards "$out/shards" --epochs 2 \
  --out "$out/load" --preview "$out/load/augmented.png" > "$out/load.json"

echo "== 4/5 train: the baseline CNN, 6 epochs, evaluated every epoch, best weights scored on test"
rm -rf "$out/train"
"$bin" train --config configs/train_small_cnn.json --shards "$out/shards" --out "$out/train" --epochs 6

echo "== 5/5 bench --study batch: baseline micro-batch 32 vs find-batch's plan (lr scaled), 3 seeds x 3 epochs each"
"$bin" bench --study batch --config configs/train_small_cnn.json --shards "$out/shards" --out "$out/study" \
  --epochs 3 --memory-budget 512MiB --set find_batch.max_batch=128

cat <<MSG

Demo finished. Results:
  catalog (images + manifest.csv):   $out/catalog
  shards, dataset.json, report.md:   $out/shards
  quarantined rows with reasons:     $out/shards/quarantine.csv
  loader throughput (load.json):     $out/load/load.json
  augmented batch preview:           $out/load/augmented.png
  trained model, metrics, summary:   $out/train (summary.json, metrics.csv, test_report.md, checkpoints/)
  batch-size study report:           $out/study/report.html (opens offline; study.json)
MSG
