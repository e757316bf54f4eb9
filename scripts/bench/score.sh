#!/usr/bin/env bash
# Batch scoring, shoplens (C++) vs Python PyTorch eager, side by side: the same exported model,
# the same image files, batch, preprocessing and thread counts; trials alternate so machine noise
# hits both. Prints end-to-end and compute-only images/s, p95 batch latency and the ratios.
#
# Usage: scripts/bench/score.sh [--trials N] [--images N] [--dir DIR] [--out FILE] [CASE ...]
#   CASE = model:image_size:batch:workers:threads[:precision[:device[:cl]]]
#          precision fp32 (default) or bf16; device auto (default), cpu or cuda; cl: the model is
#          trained, exported and scored channels-last
#          default cases: small_cnn:64:64:1:2 resnet18:224:32:1:2
#   --trials  alternating trials per side (default 3); --images  catalog size (default 1000)
#   --dir     keeps the catalog and the exported models between runs (default bench-score/)
#   --out     JSON-lines records (default score_bench.jsonl)
# Binary and Python from $SHOPLENS_BIN (default build/release/bin/shoplens) and $SHOPLENS_PYTHON
# (default /usr/bin/python3).
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
trials=3 images=1000 dir=bench-score out=score_bench.jsonl cases=()
parse_options 'trials= images= dir= out= @cases' "$@"
[[ ${#cases[@]} -eq 0 ]] && cases=(small_cnn:64:64:1:2 resnet18:224:32:1:2)
require_bin
mkdir -p "$dir"
catalog_and_shards "$dir" --num-images "$images" --image-size-range 300:800 --seed 17 -- --storage-size 64 >/dev/null
: > "$out"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
printf '%-26s %10s %10s %6s %10s %10s %6s %8s %8s %7s\n' "case (model:size:b:w:t...)" "ours e2e" "py e2e" "ratio" \
  "ours comp" "py comp" "ratio" "ours p95" "py p95" "overlap"
for c in "${cases[@]}"; do
  IFS=: read -r model size batch workers threads precision device cl <<< "$c"
  precision=${precision:-fp32} device=${device:-auto} cl=${cl:-}
  model_dir=$dir/model-$model-$size${cl:+-cl}
  if [[ ! -f $model_dir/model_card.json ]]; then  # weights do not matter for speed: one training step
    rm -rf "$dir/run-$model-$size${cl:+-cl}"
    "$bin" train --shards "$dir/shards" --out "$dir/run-$model-$size${cl:+-cl}" --model "$model" --max-steps 1 --epochs 1 \
      -b 8 --set "augment.image_size=$size" --set train.tensorboard=false \
      --set "model.channels_last=$([[ $cl == cl ]] && echo true || echo false)" > "$dir/train-$model-$size.log" 2>&1 ||
      { echo "score.sh: training the $model model to export failed: $dir/train-$model-$size.log" >&2; exit 1; }
    "$bin" export --run "$dir/run-$model-$size${cl:+-cl}" --out "$model_dir" > "$dir/export-$model-$size.log" 2>&1 ||
      { echo "score.sh: export failed: $dir/export-$model-$size.log" >&2; exit 1; }
  fi
  ours=() theirs=()
  for ((t = 0; t < trials; t++)); do
    rm -rf "$dir/out"
    "$bin" score --weights "$model_dir" --input "$dir/catalog/manifest.csv" --out "$dir/out" -b "$batch" \
      --workers "$workers" --threads "$threads" --precision "$precision" --device "$device" --chunk-rows 100000 \
      --log-level warn >/dev/null
    line=$("$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"impl":"shoplens","commit":sys.argv[2],"case":sys.argv[3],"images_per_second":r["images_per_second"],"compute_images_per_second":r["compute_only_images_per_second"],"p50_ms":r["batch_latency_ms"]["p50"],"p95_ms":r["batch_latency_ms"]["p95"],"p99_ms":r["batch_latency_ms"]["p99"],"precision":r.get("precision"),"device":r.get("device"),"overlap_efficiency":r["overlap_efficiency"],"rows":r["rows"],"rows_error":r["rows_error"],"threads":r["threads"]}))' "$dir/out/report.json" "$commit" "$c")
    echo "$line" >> "$out"; ours+=("$line")
    line=$("$python" scripts/bench/score_peer.py --model "$model_dir" --input "$dir/catalog/manifest.csv" \
      --batch-size "$batch" --workers "$workers" --threads "$threads" --precision "$precision" --device "$device")
    echo "$line" >> "$out"; theirs+=("$line")
  done
  "$python" - "$c" "$(printf '%s\n' "${ours[@]}")" "$(printf '%s\n' "${theirs[@]}")" <<'PY'
import json, statistics, sys
case = sys.argv[1]
ours = [json.loads(l) for l in sys.argv[2].splitlines()]
theirs = [json.loads(l) for l in sys.argv[3].splitlines()]
m = lambda rs, k: statistics.median(r[k] for r in rs)
a, b = m(ours, "images_per_second"), m(theirs, "images_per_second")
ca, cb = m(ours, "compute_images_per_second"), m(theirs, "compute_images_per_second")
print(f"{case:<26} {a:10.1f} {b:10.1f} {a / b:5.2f}x {ca:10.1f} {cb:10.1f} {ca / cb:5.2f}x "
      f"{m(ours, 'p95_ms'):8.1f} {m(theirs, 'p95_ms'):8.1f} {m(ours, 'overlap_efficiency'):7.2f}")
PY
done
echo "records: $out"
