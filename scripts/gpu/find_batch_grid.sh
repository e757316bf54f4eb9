#!/usr/bin/env bash
# The find-batch grid on a card: for every budget and case, `fit` (the product's search) against
# `exact` (the true maximum) and Lightning's BatchSizeFinder (binsearch) on the same card and budget,
# then one real epoch with validation at fit's answer with the worst-case augmentation (OOM retries,
# the run's peak), through scripts/bench/find_batch.sh. Writes DIR/grid.jsonl (every record) and
# DIR/grid.md (the table docs/FIND_BATCH.md and docs/PERFORMANCE.md carry) and prints the table.
#
# Usage: scripts/gpu/find_batch_grid.sh [--cpu] [--budgets "8GiB 24GiB card"] [--cases "..."]
#                                       [--dir DIR] [--threads N] [--bin PATH] [--python PATH]
#   --cpu      the rehearsal on a machine without a GPU: the same steps on small CPU cases
#              (small_cnn 32 px, resnet18 64 px bf16, text_tiny 64 tokens) under 64MiB and 256MiB
#   --budgets  budgets (default "8GiB 24GiB card"; card: the whole card's memory; --cpu: "64MiB 256MiB")
#   --cases    model:size:precision:layout, layout cl (channels-last) or - ; size tokens=N for a
#              text model (default: resnet50:224:bf16:cl resnet18:128:bf16:cl vit_base:224:bf16:-
#              resnet50:224:fp16:cl text_base:tokens=512:bf16:-)
#   --dir      working folder (default find-batch-grid/)
#   --threads  CPU threads and loader workers (default: all usable cores; --cpu: 2)
#   --bin      the shoplens binary (default $SHOPLENS_BIN, else build/release/bin/shoplens)
#   --python   the Python with torch and pytorch-lightning for the Lightning runs (default
#              $SHOPLENS_PYTHON, else python3)
# Goals per cell (issue 40): fit >= 97% of exact, <= 5 memory probes, less time than Lightning,
# 0 OOM retries in the epoch. On the device, split the grid over calls with --budgets/--cases
# (one call has 10 minutes).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../bench/lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib/bench.sh"
cpu=0 budgets="" cases="" dir=find-batch-grid threads="" bin=${SHOPLENS_BIN:-$src/build/release/bin/shoplens}
python=${SHOPLENS_PYTHON:-python3}
parse_options 'cpu! budgets= cases= dir= threads= bin= python=' "$@"
if [[ $cpu -eq 1 ]]; then
  device=cpu budgets=${budgets:-"64MiB 256MiB"} threads=${threads:-2} images=300
  cases=${cases:-"small_cnn:32:fp32:- resnet18:64:bf16:- text_tiny:tokens=64:fp32:-"}
else
  device=cuda budgets=${budgets:-"8GiB 24GiB card"} threads=${threads:-$(nproc)} images=3000
  cases=${cases:-"resnet50:224:bf16:cl resnet18:128:bf16:cl vit_base:224:bf16:- resnet50:224:fp16:cl text_base:tokens=512:bf16:-"}
fi
[[ -x $bin ]] || { echo "find_batch_grid.sh: no $bin (scripts/build.sh, or --bin)" >&2; exit 2; }
mkdir -p "$dir/data"
dir=$(cd "$dir" && pwd)
: > "$dir/grid.jsonl"
# One catalog for every cell's epoch, made as find_batch.sh makes its own (it reuses what is there).
catalog_and_shards --logs "$dir/data" "$dir/data" --num-images "$images" --image-size-range 160:400 --seed 11 \
  --threads "$threads" -- --storage-size 128 --threads "$threads"

card_bytes() {
  "$python" -c 'import torch; print(torch.cuda.get_device_properties(0).total_memory)'
}

for budget in $budgets; do
  [[ $budget == card ]] && budget="$(card_bytes)B"
  for c in $cases; do
    IFS=: read -r model size precision layout <<< "$c"
    cell="$dir/$budget-$model-${size//=/}-$precision"
    mkdir -p "$cell"
    ln -sfn "$dir/data/catalog" "$cell/catalog"
    ln -sfn "$dir/data/shards" "$cell/shards"
    sets=()
    [[ $layout == cl ]] && sets=(--set model.channels_last=true)
    echo "== $budget $c"
    SHOPLENS_BIN=$bin bash "$src/scripts/bench/find_batch.sh" --budget "$budget" --threads "$threads" \
      --precision "$precision" --device "$device" --strategies fit,exact --images "$images" \
      --dir "$cell" --out "$cell/records.jsonl" "${sets[@]}" "$model:$size" || echo "   (the cell failed: $cell)"
    cat "$cell/records.jsonl" >> "$dir/grid.jsonl" 2> /dev/null || true
    # Lightning's finder: the image models it has a peer of, at a precision it supports.
    if [[ $size != tokens=* && $precision != fp16 ]]; then
      lightning=(--model "$model" --image-size "$size" --precision "$precision" --memory-budget "$budget"
                 --mode binsearch --device "$device" --threads "$threads" --out "$cell/lightning.json")
      [[ $layout == cl ]] && lightning+=(--channels-last)
      [[ $cpu -eq 1 ]] && lightning+=(--max-trials 3)
      "$python" "$src/scripts/gpu/lightning_batch_finder.py" "${lightning[@]}" > "$cell/lightning.log" 2>&1 ||
        echo "   (Lightning failed: $cell/lightning.log)"
    fi
  done
done

"$python" - "$dir" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(f"{d}/grid.jsonl") if l.strip()]
out = ["| budget | case | precision | fit | exact | % exact | memory probes | fit s | Lightning | Lightning % | trials | Lightning s | epoch OOM retries | goals |",
       "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
for r in rows:
    if r.get("kind") != "find-batch" or r.get("strategy") != "fit":
        continue
    size = r.get("image_size") or f"{r.get('sequence_length')} tokens"
    cell = glob.glob(f"{d}/{r['budget']}-{r['model']}-*-{r['precision']}")
    light = {}
    for c in cell:
        if os.path.exists(f"{c}/lightning.json") and str(size).split()[0] in c:
            light = json.load(open(f"{c}/lightning.json"))
    epoch = next((e for e in rows if e.get("kind") == "train-epoch" and e["model"] == r["model"]
                  and e.get("budget") == r["budget"] and e.get("precision") == r["precision"]), {})
    exact, pct = r.get("exact_max"), r.get("percent_of_exact")
    lb = light.get("micro_batch")
    goals = [pct is not None and pct >= 97, r["probes"] <= 5, not light or r["seconds"] < light.get("total_seconds", 0),
             epoch.get("oom_retries", 0) == 0]
    out.append(f"| {r['budget']} | {r['model']} {size} | {r['precision']} | {r['micro_batch']} | {exact} | "
               f"{pct if pct is not None else '-'} | {r['probes']} | {r['seconds']:.1f} | {lb if lb else '-'} | "
               f"{round(100 * lb / exact, 1) if lb and exact else '-'} | {light.get('probes', '-')} | "
               f"{light.get('total_seconds', '-')} | {epoch.get('oom_retries', '-')} | {'met' if all(goals) else 'NOT met'} |")
open(f"{d}/grid.md", "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
echo "records: $dir/grid.jsonl; table: $dir/grid.md"
