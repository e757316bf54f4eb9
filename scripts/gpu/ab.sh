#!/usr/bin/env bash
# Paired A/B of one config setting on the GPU machine: `shoplens train` runs with --set A and with
# --set B, interleaved (A B A B ...), on the batch study's catalog (scripts/gpu/study.sh builds it
# in --work), and a table of each run's images/s, training seconds and loader wait from its
# summary.json. The ratio B/A per pair and its spread are printed; OUT/ab-NAME.md keeps the table.
# With --loader the arms run `shoplens load` instead (the training loader alone, for a CUDA job:
# train.device=cuda, so loader.pin_memory applies; MODEL is ignored), and the table has the
# images/s of each arm's epochs after the first.
#
# Usage: scripts/gpu/ab.sh [--kit DIR] [--out DIR] [--work DIR] [--repeats N] [--name NAME]
#                          MODEL:PX:EPOCHS:BATCH KEY=A KEY=B [--set KEY=VALUE]...
#   --kit      the GPU kit (default gpu-kit)
#   --out      results (default $OUT when set, else ab-out)
#   --work     the study's scratch data, with shards/ (default /tmp/shoplens-study)
#   --repeats  pairs (default 2)
#   --name     the table's name (default: the first setting's key)
#   --set      more settings for both arms (repeatable)
#   --loader   time the loader alone (shoplens load), not training
set -euo pipefail
# shellcheck source=../bench/lib/options.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib/options.sh"
cd "$(dirname "$0")/../.."
kit=gpu-kit out=${OUT:-ab-out} work=/tmp/shoplens-study repeats=2 name="" positional=() common=() verb=train
parse_options 'kit= out= work= repeats= name= set+common loader!verb=load @positional' "$@"
[[ ${#positional[@]} -eq 3 ]] || { echo "ab.sh: give MODEL:PX:EPOCHS:BATCH KEY=A KEY=B (try --help)" >&2; exit 2; }
[[ -f $kit/env.sh ]] || { echo "ab.sh: no GPU kit at $kit (scripts/gpu/pack.sh)" >&2; exit 2; }
[[ -f $work/shards/dataset.json ]] || { echo "ab.sh: no shards in $work (run scripts/gpu/study.sh first)" >&2; exit 2; }
IFS=: read -r model px epochs batch <<< "${positional[0]}"
arm_a=${positional[1]} arm_b=${positional[2]}
name=${name:-${arm_a%%=*}}
# shellcheck disable=SC1091
source "$kit/env.sh"
threads=$(nproc) dir=$out/ab-$name
rm -rf "$dir"; mkdir -p "$dir"
for ((i = 1; i <= repeats; i++)); do
  for arm in a b; do
    setting=$arm_a; [[ $arm == b ]] && setting=$arm_b
    if [[ $verb == load ]]; then
      run=("$SHOPLENS_BIN" load --shards "$work/shards" --out "$dir/$arm-$i" -b "$batch" --epochs "$epochs"
           --set train.device=cuda)
    else
      run=("$SHOPLENS_BIN" train --shards "$work/shards" --out "$dir/$arm-$i" -m "$model" -b "$batch" --epochs "$epochs"
           --precision bf16 --set model.channels_last=true)
    fi
    "${run[@]}" --threads "$threads" --set "augment.image_size=$px" --set "loader.workers=$threads" --set "$setting" \
      "${common[@]}" > "$dir/$arm-$i.log" 2>&1 \
      || { echo "ab.sh: run $arm-$i ($setting) failed: $dir/$arm-$i.log" >&2; exit 1; }
  done
done
python3 - "$dir" "$repeats" "$arm_a" "$arm_b" "${positional[0]}" "$verb" > "$out/ab-$name.md" <<'PY'
import json, statistics, sys
d, n, a, b, case, verb = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
def s(arm, i): return json.load(open(f"{d}/{arm}-{i}/summary.json"))
def loader_rate(arm, i):
    epochs = json.load(open(f"{d}/{arm}-{i}/load.json"))["epochs"][1:]  # the first starts the workers
    return sum(e["samples"] for e in epochs) / sum(e["seconds"] for e in epochs)
if verb == "load":
    print(f"## loader alone, {case}: A {a}, B {b}, {n} pairs\n")
    print("| pair | A images/s | B images/s | B/A |\n|--:|--:|--:|--:|")
    ratios = []
    for i in range(1, n + 1):
        x, y = loader_rate("a", i), loader_rate("b", i)
        ratios.append(y / x)
        print(f"| {i} | {x:.0f} | {y:.0f} | {ratios[-1]:.3f} |")
    sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
    print(f"\nB/A images/s: mean {statistics.mean(ratios):.3f}, sd {sd:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
    sys.exit(0)
print(f"## {case}: A {a}, B {b}, {n} pairs\n")
print("| pair | A images/s | B images/s | B/A | A train s (wait) | B train s (wait) |\n|--:|--:|--:|--:|--:|--:|")
ratios = []
for i in range(1, n + 1):
    x, y = s("a", i), s("b", i)
    ratios.append(y["images_per_second"] / x["images_per_second"])
    w = lambda r: f"{r['train_seconds']:.1f} ({r.get('input_wait_seconds_this_process', float('nan')):.1f})"
    print(f"| {i} | {x['images_per_second']:.0f} | {y['images_per_second']:.0f} | {ratios[-1]:.3f} | {w(x)} | {w(y)} |")
sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
print(f"\nB/A images/s: mean {statistics.mean(ratios):.3f}, sd {sd:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
PY
cat "$out/ab-$name.md"
