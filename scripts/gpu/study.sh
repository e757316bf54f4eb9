#!/usr/bin/env bash
# The batch-size study on the GPU machine (shoplens bench --study batch) for one or more
# MODEL:PX:EPOCHS cases, with the GPU kit: the same 6000-image catalog as prove.sh's calls 2 and 3
# (160-400 px, stored at 256 px), bf16, channels-last, 24 GiB budget, 3 seeds per case, every
# usable core for threads and loader workers. Results: OUT/study-MODEL-PX/study.json, report.html
# and the runs' logs; OUT/study.md gathers each case's summary.
#
# Usage: scripts/gpu/study.sh [--kit DIR] [--out DIR] [--work DIR] [--images N] [--seeds N]
#                             [--case-seconds N] CASE...
#   --kit           the GPU kit (default gpu-kit)
#   --out           results (default $OUT when set, else study-out)
#   --work          scratch data (default /tmp/shoplens-study)
#   --images        catalog size (default 6000; the CPU rehearsal uses a few hundred)
#   --seeds         seeds per case (default 3)
#   --case-seconds  the limit of each case (default 240)
#   CASE            MODEL:PX:EPOCHS, e.g. resnet18:128:5 resnet50:224:3
set -euo pipefail
# shellcheck source=../bench/lib/options.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib/options.sh"
cd "$(dirname "$0")/../.."
kit=gpu-kit out=${OUT:-study-out} work=/tmp/shoplens-study images=6000 seeds=3 case_seconds=240 cases=()
parse_options 'kit= out= work= images= seeds= case-seconds= @cases' "$@"
[[ ${#cases[@]} -gt 0 ]] || { echo "study.sh: give at least one MODEL:PX:EPOCHS case (try --help)" >&2; exit 2; }
[[ -f $kit/env.sh ]] || { echo "study.sh: no GPU kit at $kit (scripts/gpu/pack.sh)" >&2; exit 2; }
# shellcheck disable=SC1091
source "$kit/env.sh"
mkdir -p "$out" "$work"
threads=$(nproc)
if [[ ! -f $work/shards/dataset.json ]]; then
  "$SHOPLENS_BIN" make-data --out "$work/catalog" --num-images "$images" --image-size-range 160:400 --seed 11 --threads "$threads"
  "$SHOPLENS_BIN" prepare --input "$work/catalog/manifest.csv" --out "$work/shards" --storage-size 256 --threads "$threads"
fi
status=0
for c in "${cases[@]}"; do
  IFS=: read -r model px epochs <<< "$c"
  dir=$out/study-$model-$px
  rm -rf "$dir"
  timeout --kill-after=10 "$case_seconds" "$SHOPLENS_BIN" bench --study batch --shards "$work/shards" --out "$dir" \
    --epochs "$epochs" --seeds "$seeds" --baseline-batch 32 --memory-budget 24GiB --threads "$threads" \
    --set "model.name=$model" --set "augment.image_size=$px" --set train.precision=bf16 \
    --set model.channels_last=true --set "loader.workers=$threads" --set find_batch.max_batch=1024 \
    > "$out/study-$model-$px.log" 2>&1 || { echo "study.sh: case $c failed (exit $?): $out/study-$model-$px.log" >&2; status=1; }
  python3 - "$dir/study.json" "$c" >> "$out/study.md" <<'PY' || status=1
import json, sys
s = json.load(open(sys.argv[1]))
print(f"## {sys.argv[2]}: {s['seeds']} seeds")
for arm in ("baseline", "find_batch"):
    a = s[arm]
    print(f"- {arm}: batch {a['micro_batch']}, lr {a['lr']:.4g}, val macro-F1 {a['val_macro_f1_mean']:.3f} +- {a['val_macro_f1_sd']:.3f}, "
          f"seconds to baseline F1 - 1: {a['seconds_to_f1']}")
for r in s["runs"]:
    for arm in ("baseline", "find_batch"):
        m = r[arm]["summary"]
        print(f"  - seed {r['seed']} {arm}: {m['images_per_second']:.0f} img/s, train {m['train_seconds']:.1f} s "
              f"(input wait {m.get('input_wait_seconds_this_process', float('nan')):.1f} s), {m['steps']} steps, F1 {r[arm]['final_val_macro_f1']:.3f}")
d, tr = s["macro_f1_difference_points"], s["throughput_ratio"]
ratio = lambda x: "n/a" if x is None else f"{x:.2f}"
print(f"- difference {d['mean']:.2f} +- {d['sd']:.2f} points, goal {'met' if s['goal_met'] else 'NOT met'}; "
      f"images/s ratio of the arms' means {ratio(tr['of_arm_means'])} (per seed: {', '.join(ratio(x) for x in tr['per_seed'])})\n")
PY
done
cat "$out/study.md"
exit "$status"
