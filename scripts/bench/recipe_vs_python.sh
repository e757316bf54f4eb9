#!/usr/bin/env bash
# Time-to-accuracy of recipe.sh's baseline against its Python peer (scripts/bench/recipe_peer.py:
# torchvision transforms, a timm-style loop, the same samples and recipe), seed by seed, the two
# runs of a seed back to back so that both see the same machine. Prints a Markdown table: best
# validation macro-F1, test macro-F1 of the best weights, train seconds, and the train seconds
# until validation macro-F1 first reached the target (0.9 x the lower of the two sides' mean best).
#
# Usage: scripts/bench/recipe_vs_python.sh [--dir DIR] [--bin PATH] [--python PATH] [--seeds "1 2 3"] [--threads 1]
#   --dir      recipe.sh's working folder (default bench-recipe/); its catalog and shards are made first
#   --bin      the shoplens binary (default $SHOPLENS_BIN, else build/release/bin/shoplens)
#   --python   the interpreter whose torch the binary links (default $SHOPLENS_PYTHON, else /usr/bin/python3)
#   --seeds    the seeds, one run of each side per seed (default "1 2 3")
#   --threads  the Python peer's threads (default 1; recipe.sh's runs use one)
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
dir=bench-recipe seeds="1 2 3" threads=1
parse_options 'dir= bin= python= seeds= threads=' "$@"
require_bin
# recipe.sh makes the catalog, the shards and base.json; its baseline run is ours for each seed.
mkdir -p "$dir/peer"
for seed in $seeds; do
  SHOPLENS_BIN=$bin bash scripts/bench/recipe.sh --dir "$dir" --seeds "$seed" baseline > "$dir/recipe_baseline.md"
  "$python" scripts/bench/recipe_peer.py --catalog "$dir/catalog" --shards "$dir/shards" --seed "$seed" \
    --threads "$threads" > "$dir/peer/seed-$seed.json"
done
"$python" - "$dir" "$seeds" <<'PY'
import json, statistics, sys
d, seeds = sys.argv[1], sys.argv[2].split()
def ours(seed):
    run = f"{d}/runs/baseline-s{seed}"
    summary = json.load(open(f"{run}/summary.json"))
    evals = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"phase":"val"' in l.replace(" ", "")]
    return {"best": summary["best"]["value"], "test": summary["test_macro_f1"], "seconds": summary["train_seconds"],
            "curve": [(e["train_seconds"], e["macro_f1"]) for e in evals]}
def peer(seed):
    r = json.load(open(f"{d}/peer/seed-{seed}.json"))
    return {"best": r["best_val_macro_f1"], "test": r["test_macro_f1"], "seconds": r["train_seconds"],
            "curve": [(e["train_seconds"], e["val_macro_f1"]) for e in r["epochs"]]}
rows = {s: (ours(s), peer(s)) for s in seeds}
target = 0.9 * min(statistics.mean(r[0]["best"] for r in rows.values()), statistics.mean(r[1]["best"] for r in rows.values()))
def reach(curve):
    return next((f"{t:.1f}" for t, f in curve if f >= target), "never")
print(f"target validation macro-F1: {target:.3f}\n")
print("| seed | side | best val macro-F1 | test macro-F1 | train s | train s to target |")
print("|---|---|---:|---:|---:|---:|")
for s, (a, b) in rows.items():
    for name, r in (("shoplens", a), ("torchvision peer", b)):
        print(f"| {s} | {name} | {r['best']:.3f} | {r['test']:.3f} | {r['seconds']:.1f} | {reach(r['curve'])} |")
for i, name in enumerate(("shoplens", "torchvision peer")):
    side = [r[i] for r in rows.values()]
    print(f"| mean | {name} | {statistics.mean(x['best'] for x in side):.3f} | {statistics.mean(x['test'] for x in side):.3f} | "
          f"{statistics.mean(x['seconds'] for x in side):.1f} | |")
PY
