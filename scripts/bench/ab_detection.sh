#!/usr/bin/env bash
# How often `shoplens bench --against` (the A/B verdict) finds a planted slowdown, and how often it
# cries wolf on two identical builds, on this machine with its real noise; beside it, the verdict
# the median-and-spread gate of `bench --baseline` gives on the very same trials (docs/BENCH.md,
# "A/B on one machine"; figures in docs/PERFORMANCE.md).
#
# Usage: scripts/bench/ab_detection.sh [--runs 10] [--trials 6] [--image-size 64] [--planted-size 66]
#                                      [--batch 16] [--steps 6] [--threads 1] [--max-regression 2%]
#                                      [--dir DIR] [--bin PATH]
#   --runs       A/B runs of each kind (default 10): planted slowdown, then identical builds
#   --trials     trials per side and run (default 6: the fewest that reach p < 0.05)
#   --image-size the baseline scenario's image size (default 64: small_cnn, synthetic tensors)
#   --planted-size  the candidate's image size in the planted runs (default 66: 6% more pixels,
#                about 5% slower; scenarios are matched by name, so only the size differs)
#   --batch, --steps, --threads  the scenario's batch, measured steps per trial and threads
#   --max-regression  the limit both verdicts get (default 2%)
#   --dir        working folder (default bench-ab-detection/): the configs, every run's outputs,
#                summary.md
#   --bin        the shoplens binary (default $SHOPLENS_BIN, else build/release/bin/shoplens); the
#                identical-build runs give it as --against, the planted runs use --against-config
# A run takes 10-30 s on a quiet 2-core machine (each trial is one child process). Prints and writes
# DIR/summary.md: detections of the planted slowdown and false alarms of the identical builds, for
# the A/B verdict and for the median gate. Targets (issue 43): >= 9/10 detected, <= 1/10 false alarms.
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
runs=10 trials=6 image_size=64 planted_size=66 batch=16 steps=6 threads=1 max_regression=2% dir=bench-ab-detection
parse_options 'runs= trials= image-size= planted-size= batch= steps= threads= max-regression= dir= bin=' "$@"
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

# verdicts OUT: "AB MEDIAN" (1 = regression) from OUT/ab.jsonl.
verdicts() {
  local ab=0 median=0
  grep -q '"status":"regressed"' "$1/ab.jsonl" && ab=1
  grep -Eq '"median_gate":\{[^}]*"regressed":true' "$1/ab.jsonl" && median=1
  echo "$ab $median"
}

declare -A count=([planted_ab]=0 [planted_median]=0 [same_ab]=0 [same_median]=0)
rows=""
for kind in planted same; do
  for i in $(seq 1 "$runs"); do
    out=$dir/$kind-$i
    rm -rf "$out"
    if [[ $kind == planted ]]; then against=(--config "$dir/planted.json" --against-config "$dir/base.json")
    else against=(--config "$dir/base.json" --against "$bin"); fi
    start=$SECONDS
    "$bin" bench "${against[@]}" --out "$out" --max-regression "$max_regression" --fail-on never \
      > "$out.log" 2>&1 || { echo "run $kind-$i failed: see $out.log" >&2; exit 1; }
    read -r ab median < <(verdicts "$out")
    count[${kind}_ab]=$((count[${kind}_ab] + ab))
    count[${kind}_median]=$((count[${kind}_median] + median))
    change=$(grep -o '"change":[-0-9.e]*' "$out/ab.jsonl" | sed -n 2p | cut -d: -f2)
    line="| $kind | $i | $ab | $median | $change | $((SECONDS - start)) s | $(cut -d' ' -f1 /proc/loadavg) |"
    echo "$line"
    rows+="$line"$'\n'
  done
done

{
  echo "## bench --against: detection on $(nproc) cores ($(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD))"
  echo
  echo "small_cnn $image_size px vs $planted_size px planted, batch $batch, $steps steps, $threads thread(s),"
  echo "$trials trials per side, --max-regression $max_regression."
  echo
  echo "| | A/B verdict | median gate |"
  echo "|---|---|---|"
  echo "| planted slowdown detected | ${count[planted_ab]}/$runs | ${count[planted_median]}/$runs |"
  echo "| identical builds flagged | ${count[same_ab]}/$runs | ${count[same_median]}/$runs |"
  echo
  echo "| kind | run | A/B regression | median gate regression | A/B images/s change | time | load |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s' "$rows"
} | tee "$dir/summary.md"
