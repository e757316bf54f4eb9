#!/usr/bin/env bash
# find-batch on CPU under a memory budget (the tracking allocator): our fit strategy against
# Lightning's binsearch (reproduced in the same tool) and the exact maximum (doubling + bisection
# to a gap of 1 on the OOM criterion), then a real epoch + validation at the batch `fit` found,
# with worst-case augmentation, counting OOMs (goal: 0).
#
# Usage: scripts/bench/find_batch.sh [--budget 2GiB] [--threads 2] [--dir DIR] [--out FILE] [--no-epoch] [CASE ...]
#   CASE = model:image_size   default: small_cnn:64 resnet18:96
# DIR (default bench-find-batch/) keeps the catalog and shards between runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SHOPLENS_BIN:-build/release/bin/shoplens}
python=${SHOPLENS_PYTHON:-/usr/bin/python3}
budget=2GiB threads=2 dir=bench-find-batch out=find_batch_bench.jsonl epoch=1 cases=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-epoch) epoch=0; shift ;;
    *) cases+=("$1"); shift ;;
  esac
done
[[ ${#cases[@]} -eq 0 ]] && cases=(small_cnn:64 resnet18:96)
[[ -x $bin ]] || { echo "no $bin: run scripts/build.sh first" >&2; exit 2; }
mkdir -p "$dir"
: > "$out"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
common=(--memory-budget "$budget" --threads "$threads" --no-cache --json --set "find_batch.cache_dir=$dir/cache"
        --set loader.workers="$threads")

printf '%-14s %-10s %7s %9s %7s %9s\n' model strategy batch "% exact" probes seconds
for c in "${cases[@]}"; do
  IFS=: read -r model size <<< "$c"
  for strategy in fit binsearch exact; do
    "$bin" find-batch -m "$model" --image-size "$size" --strategy "$strategy" "${common[@]}" 2>/dev/null \
      > "$dir/$model-$strategy.json"
  done
  "$python" - "$dir" "$model" "$commit" "$budget" "$threads" "$size" "$out" <<'PY'
import json, sys
d, model, commit, budget, threads, size, out = sys.argv[1:]
runs = {s: json.load(open(f"{d}/{model}-{s}.json")) for s in ("fit", "binsearch", "exact")}
exact = runs["exact"]["micro_batch"]
with open(out, "a") as f:
    for s, r in runs.items():
        pct = 100.0 * r["micro_batch"] / exact
        print(f"{model:<14} {s:<10} {r['micro_batch']:7d} {pct:8.1f}% {len(r['probes']):7d} {r['total_seconds']:9.1f}")
        f.write(json.dumps({"commit": commit, "date": r.get("date"), "device": r.get("device"), "model": model,
                            "image_size": int(size), "budget": budget, "threads": int(threads), "strategy": s,
                            "micro_batch": r["micro_batch"], "exact_max": exact, "percent_of_exact": pct,
                            "probes": len(r["probes"]), "seconds": r["total_seconds"],
                            "fit": r["fit"], "headroom_bytes": r["headroom_bytes"]}) + "\n")
PY
done

[[ $epoch -eq 1 ]] || exit 0
# One epoch + validation + test at the found batch, worst-case augmentation, the same budget.
if [[ ! -f $dir/shards/dataset.json ]]; then
  "$bin" make-data --out "$dir/catalog" --num-images 3000 --image-size-range 160:400 --seed 11 >/dev/null 2>&1
  "$bin" prepare --input "$dir/catalog/manifest.csv" --out "$dir/shards" --storage-size 128 --threads "$threads" >/dev/null 2>&1
fi
printf '\n%-14s %7s %11s %12s %10s\n' model batch oom_retries images/s peak_rss
for c in "${cases[@]}"; do
  IFS=: read -r model size <<< "$c"
  batch=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["micro_batch"])' "$dir/$model-fit.json")
  rm -rf "$dir/run-$model"
  "$bin" train --shards "$dir/shards" --out "$dir/run-$model" -m "$model" --epochs 1 -b "$batch" \
    --memory-budget "$budget" --threads "$threads" --set "augment.image_size=$size" --set augment.worst_case=true \
    --set loader.workers="$threads" --set train.tensorboard=false >/dev/null 2>&1
  "$python" - "$dir/run-$model/summary.json" "$model" "$commit" "$budget" "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
model, commit, budget, out = sys.argv[2:]
print(f"{model:<14} {s['micro_batch']:7d} {s['oom_retries']:11d} {s['images_per_second']:12.1f} {s['peak_rss_bytes'] / 2**20:8.0f}MiB")
with open(out, "a") as f:
    f.write(json.dumps({"commit": commit, "model": model, "budget": budget, "epoch_at_found_batch": True,
                        "micro_batch": s["micro_batch"], "oom_retries": s["oom_retries"], "status": s["status"],
                        "images_per_second": s["images_per_second"], "steps": s["steps"]}) + "\n")
PY
done
echo "records: $out"
