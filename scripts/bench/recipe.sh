#!/usr/bin/env bash
# The training-recipe options (docs/TRAINING.md) on the demo catalog: small_cnn trained with each
# option on and off (the baseline), over 3 seeds, one thread. Prints a Markdown table of the best
# validation macro-F1 (mean and spread over the seeds), the test macro-F1 of the best weights and
# the train seconds; the per-run summaries stay in DIR/runs/<variant>-s<seed>/summary.json.
#
# Usage: scripts/bench/recipe.sh [--dir DIR] [--bin PATH] [--epochs N] [--seeds "1 2 3"] [VARIANT ...]
#   VARIANT   baseline pad_crop trivial erasing one_cycle ema (default: all). model.drop_path
#             applies to ViTs only and is not measured here (small_cnn rejects it).
#   --dir     working folder (default bench-recipe/): catalog, shards and runs, made once and reused
#   --bin     the shoplens binary (default $SHOPLENS_BIN, else build/release/bin/shoplens)
#   --epochs  epochs per run (default 8)
#   --seeds   the seeds, one run each per variant (default "1 2 3")
# Each run is well under a minute on one quiet core; run it on a quiet machine (`nice` when sharing one).
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
dir=bench-recipe epochs=8 seeds="1 2 3"
variants=()
parse_options 'dir= bin= epochs= seeds= @variants' "$@"
[ ${#variants[@]} -gt 0 ] || variants=(baseline pad_crop trivial erasing one_cycle ema)

# The option each variant switches on; everything else is the baseline below.
variant_sets() {
  case "$1" in
    baseline) ;;
    pad_crop) echo "--set augment.pad_crop=4" ;;
    trivial) echo "--set augment.auto_augment=trivial" ;;
    erasing) echo "--set augment.random_erasing=0.25" ;;
    one_cycle) echo "--set schedule.name=one_cycle" ;;
    ema) echo "--set train.ema_decay=0.95" ;;
    *) options_usage_error "unknown variant $1" ;;
  esac
}

for variant in "${variants[@]}"; do variant_sets "$variant" > /dev/null; done  # an unknown one stops here
require_bin
mkdir -p "$dir/runs"
cat > "$dir/base.json" <<JSON
{
  "data": {"storage_size": 40},
  "augment": {"image_size": 32, "crop_scale": [0.6, 1.0], "brightness": 0.0, "contrast": 0.0, "saturation": 0.0, "hue": 0.0},
  "loader": {"batch_size": 64},
  "model": {"name": "small_cnn", "dropout": 0.2},
  "optim": {"name": "adamw", "lr": 0.003, "weight_decay": 0.05},
  "schedule": {"name": "cosine", "warmup_epochs": 1},
  "train": {"epochs": $epochs, "class_balance": "weighted_loss", "keep_last": 1, "tensorboard": false}
}
JSON
catalog_and_shards "$dir" --num-images 1200 --seed 5 --threads 1 -- --config "$dir/base.json" --threads 1 >/dev/null

for variant in "${variants[@]}"; do
  for seed in $seeds; do
    run="$dir/runs/$variant-s$seed"
    rm -rf "$run"
    # shellcheck disable=SC2046
    "$bin" train --config "$dir/base.json" --shards "$dir/shards" --out "$run" --threads 1 --set run.seed="$seed" \
      $(variant_sets "$variant") --log-level warn >/dev/null
    echo "$variant seed $seed: done" >&2
  done
done

python3 - "$dir/runs" "${variants[@]}" <<'PY'
import json, statistics, sys
runs, variants = sys.argv[1], sys.argv[2:]
print("| variant | val macro-F1 mean | spread (min-max) | test macro-F1 mean | train s mean |")
print("|---|---:|---:|---:|---:|")
for v in variants:
    rows = []
    for path in sorted(__import__("glob").glob(f"{runs}/{v}-s*/summary.json")):
        s = json.load(open(path))
        rows.append((s["best"]["value"], s["test_macro_f1"], s["train_seconds"]))
    if not rows:
        continue
    val = [r[0] for r in rows]
    print(f"| {v} | {statistics.mean(val):.3f} | {min(val):.3f}-{max(val):.3f} | "
          f"{statistics.mean(r[1] for r in rows):.3f} | {statistics.mean(r[2] for r in rows):.1f} |")
PY
