#!/usr/bin/env bash
# Batch scoring, shoplens (C++) vs Python PyTorch eager, side by side: the same exported model,
# the same image files, batch, preprocessing and thread counts; trials alternate so machine noise
# hits both. Prints end-to-end and compute-only images/s, p95 batch latency and the ratios.
#
# Usage: scripts/bench/score.sh [--trials N] [--images N] [--dir DIR] [--out FILE] [CASE ...]
#   CASE = model:image_size:batch:workers:threads   default: small_cnn:64:64:1:2 resnet18:224:32:1:2
# DIR (default bench-score/) keeps the catalog and the exported models between runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SHOPLENS_BIN:-build/release/bin/shoplens}
python=${SHOPLENS_PYTHON:-/usr/bin/python3}
trials=3 images=1000 dir=bench-score out=score_bench.jsonl cases=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --trials) trials=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done
[[ ${#cases[@]} -eq 0 ]] && cases=(small_cnn:64:64:1:2 resnet18:224:32:1:2)
[[ -x $bin ]] || { echo "no $bin: run scripts/build.sh first" >&2; exit 2; }
mkdir -p "$dir"
if [[ ! -f $dir/catalog/manifest.csv ]]; then
  "$bin" make-data --out "$dir/catalog" --num-images "$images" --image-size-range 300:800 --seed 17 >/dev/null
fi
if [[ ! -f $dir/shards/dataset.json ]]; then
  "$bin" prepare --input "$dir/catalog/manifest.csv" --out "$dir/shards" --storage-size 64 >/dev/null
fi
: > "$out"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
printf '%-26s %10s %10s %6s %10s %10s %6s %8s %8s %7s\n' "case (model:size:b:w:t)" "ours e2e" "py e2e" "ratio" \
  "ours comp" "py comp" "ratio" "ours p95" "py p95" "overlap"
for c in "${cases[@]}"; do
  IFS=: read -r model size batch workers threads <<< "$c"
  model_dir=$dir/model-$model-$size
  if [[ ! -f $model_dir/model_card.json ]]; then  # weights do not matter for speed: one training step
    rm -rf "$dir/run-$model-$size"
    "$bin" train --shards "$dir/shards" --out "$dir/run-$model-$size" --model "$model" --max-steps 1 --epochs 1 \
      -b 8 --set "augment.image_size=$size" --set train.tensorboard=false >/dev/null 2>&1
    "$bin" export --run "$dir/run-$model-$size" --out "$model_dir" >/dev/null 2>&1
  fi
  ours=() theirs=()
  for ((t = 0; t < trials; t++)); do
    rm -rf "$dir/out"
    "$bin" score --model "$model_dir" --input "$dir/catalog/manifest.csv" --out "$dir/out" -b "$batch" \
      --workers "$workers" --threads "$threads" --chunk-rows 100000 --log-level warn >/dev/null
    line=$("$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"impl":"shoplens","commit":sys.argv[2],"case":sys.argv[3],"images_per_second":r["images_per_second"],"compute_images_per_second":r["compute_only_images_per_second"],"p95_ms":r["batch_latency_ms"]["p95"],"overlap_efficiency":r["overlap_efficiency"],"rows":r["rows"],"rows_error":r["rows_error"],"threads":r["threads"]}))' "$dir/out/report.json" "$commit" "$c")
    echo "$line" >> "$out"; ours+=("$line")
    line=$("$python" scripts/bench/score_peer.py --model "$model_dir" --input "$dir/catalog/manifest.csv" \
      --batch-size "$batch" --workers "$workers" --threads "$threads")
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
