#!/usr/bin/env bash
# How often `shoplens bench --against` (the A/B verdict) finds a planted slowdown, and how often it
# cries wolf on two identical builds, on this machine with its real noise; beside it, the verdict
# the median-and-spread gate of `bench --baseline` gives on the very same trials (docs/BENCH.md,
# "A/B on one machine"; figures in docs/PERFORMANCE.md).
#
# Usage: scripts/bench/ab_detection.sh [--runs 10] [--trials 10] [--image-size 64] [--planted-size 66]
#                                      [--batch 16] [--steps 10] [--threads 1] [--max-regression 2%]
#                                      [--time-metric cpu] [--dir DIR] [--bin PATH]
#   --runs       A/B runs of each kind (default 10): planted slowdown, then identical builds
#   --trials     trials per side and run (default 10; 6 is the fewest that can reach p < 0.05)
#   --time-metric  what the A/B verdict gates (default cpu: images per CPU-second, which other
#                processes on the machine disturb far less than wall-clock images/s); every
#                verdict is computed on both and printed
#   --image-size the baseline scenario's image size (default 64: small_cnn, synthetic tensors)
#   --planted-size  the candidate's image size in the planted runs (default 66: 6% more pixels,
#                measured about 5% fewer images per CPU-second; scenarios are matched by name, so
#                only the size differs)
#   --batch, --steps, --threads  the scenario's batch, measured steps per trial and threads
#   --max-regression  the limit both verdicts get (default 2%)
#   --dir        working folder (default bench-ab-detection/): the configs, every run's outputs,
#                summary.md
#   --bin        the shoplens binary (default $SHOPLENS_BIN, else build/release/bin/shoplens); the
#                identical-build runs give it as --against, the planted runs use --against-config
# A run takes 20-40 s on a busy 2-core machine (each trial is one child process). Prints and writes
# DIR/summary.md: detections of the planted slowdown and false alarms of the identical builds, for
# the A/B verdict and for the median gate. Targets (issue 43): >= 9/10 detected, <= 1/10 false alarms.
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
runs=10 trials=10 image_size=64 planted_size=66 batch=16 steps=10 threads=1 max_regression=2% time_metric=cpu
dir=bench-ab-detection
parse_options 'runs= trials= image-size= planted-size= batch= steps= threads= max-regression= time-metric= dir= bin=' \
  "$@"
require_bin
mkdir -p "$dir"

# config SIZE: a one-scenario bench config named small_cnn_ab, the image size SIZE.
config() {
  cat <<JSON
{"format": "shoplens-bench", "name": "ab-detection",
 "defaults": {"model": "small_cnn", "batch": $batch, "num_classes": 12, "warmup_steps": 2, "steps": $steps,
              "trials": $trials, "threads": $threads, "data": "synthetic"},
 "scenarios": [{"name": "small_cnn_ab", "image_size": $1}]}
JSON
}
config "$image_size" > "$dir/base.json"
config "$planted_size" > "$dir/planted.json"

# verdicts OUT: "WALL CPU MEDIAN MEDIAN_CPU CHANGE_CPU" from OUT/ab.jsonl: the A/B verdict on images/s and
# on images per CPU-second, the median gate on each (1 = regression), and the A/B estimate of the
# CPU-time change.
verdicts() {
  local line wall=0 cpu=0 median=0 median_cpu=0
  line=$(head -n1 "$1/ab.jsonl")
  grep -Eq '"metric":"images_per_second"[^}]*"regressed":true' <<< "$line" && wall=1
  grep -Eq '"metric":"images_per_cpu_second"[^}]*"regressed":true' <<< "$line" && cpu=1
  grep -Eq '"median_gate":\{[^}]*"regressed":true' <<< "$line" && median=1
  grep -Eq '"median_gate_cpu":\{[^}]*"regressed":true' <<< "$line" && median_cpu=1
  change=$(grep -Eo '"change":[-0-9.e]*,"change_high":[^,]*,"change_low":[^,]*,"compared":true,"confidence":[^,]*,"gated":[a-z]*,"higher_is_better":true,"improved":[a-z]*,"metric":"images_per_cpu_second"' <<< "$line" |
           sed -E 's/"change":([-0-9.e]*),.*/\1/')
  echo "$wall $cpu $median $median_cpu ${change:-nan}"
}

declare -A count=()
rows=""
for kind in planted same; do
  for i in $(seq 1 "$runs"); do
    out=$dir/$kind-$i
    rm -rf "$out"
    if [[ $kind == planted ]]; then against=(--config "$dir/planted.json" --against-config "$dir/base.json")
    else against=(--config "$dir/base.json" --against "$bin"); fi
    start=$SECONDS
    "$bin" bench "${against[@]}" --out "$out" --max-regression "$max_regression" --time-metric "$time_metric" \
      --fail-on never > "$out.log" 2>&1 || { echo "run $kind-$i failed: see $out.log" >&2; exit 1; }
    read -r wall cpu median median_cpu change < <(verdicts "$out")
    for v in wall cpu median median_cpu; do count[${kind}_$v]=$(( ${count[${kind}_$v]:-0} + ${!v} )); done
    line="| $kind | $i | $wall | $cpu | $median | $median_cpu | $(awk -v c="$change" 'BEGIN { printf "%+.1f%%", c * 100 }') | $((SECONDS - start)) s | $(cut -d' ' -f1 /proc/loadavg) |"
    echo "$line"
    rows+="$line"$'\n'
  done
done

{
  echo "## bench --against: detection on $(nproc) cores ($(date -u +%Y-%m-%dT%H:%MZ), $("$bin" --version | head -n1))"
  echo
  echo "small_cnn $image_size px vs $planted_size px planted, batch $batch, $steps steps, $threads thread(s),"
  echo "$trials trials per side, --max-regression $max_regression, --time-metric $time_metric."
  echo
  echo "| | A/B on images/s | A/B on images per CPU-s | median gate on images/s | median gate on images per CPU-s |"
  echo "|---|---|---|---|---|"
  echo "| planted slowdown detected | ${count[planted_wall]}/$runs | ${count[planted_cpu]}/$runs | ${count[planted_median]}/$runs | ${count[planted_median_cpu]}/$runs |"
  echo "| identical builds flagged | ${count[same_wall]}/$runs | ${count[same_cpu]}/$runs | ${count[same_median]}/$runs | ${count[same_median_cpu]}/$runs |"
  echo
  echo "| kind | run | A/B images/s | A/B CPU | median gate | median gate CPU | A/B CPU change | time | load |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s' "$rows"
} | tee "$dir/summary.md"
