#!/usr/bin/env bash
# Data-parallel scaling on this machine: the trainer's real step (bench-train) with the same
# global batch on 1 rank x T threads and on 2 ranks x T/2 threads (Gloo over loopback, launched by
# `shoplens launch`), and the 2-rank step with all-reduce after backward (--no-overlap) to measure
# how much communication the overlap hides. Trials alternate; medians. Writes JSON lines.
#
# Usage: scripts/bench/dist_scaling.sh [--trials N] [--out FILE] [--bucket-mb MB] [CASE ...]
#   CASE = model:global_batch:image_size   (default: small_cnn:64:64 resnet18:32:64)
#   --trials     alternating trials per case (default 3)
#   --out        JSON-lines records (default dist_scaling.jsonl)
#   --bucket-mb  bench-train --bucket-mb, the all-reduce bucket size (default 25)
# Binary and Python from $SHOPLENS_BIN (default build/release/bin/shoplens) and $SHOPLENS_PYTHON
# (default /usr/bin/python3).
# Then: scripts/bench/dist_projection.py turns the measured figures into 8- and 32-GPU estimates.
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
trials=3 out=dist_scaling.jsonl bucket=25 cases=()
parse_options 'trials= out= bucket-mb=bucket @cases' "$@"
[[ ${#cases[@]} -eq 0 ]] && cases=(small_cnn:64:64 resnet18:32:64)
require_bin
cores=$(nproc)
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
: > "$out"

printf '%-22s %10s %10s %10s %8s %9s %9s %8s\n' case "1 rank/s" "2 ranks/s" "no-ovl/s" speedup "wait ms" "no-ovl ms" hidden
for c in "${cases[@]}"; do
  IFS=: read -r model global size <<< "$c"
  common=(--model "$model" --image-size "$size" --warmup-steps 3 --steps 10 --bucket-mb "$bucket" --format json)
  one=() two=() noov=() wait_on=() wait_off=()
  for ((t = 0; t < trials; t++)); do
    line=$("$bin" bench-train "${common[@]}" --batch-size "$global" --threads "$cores" 2>/dev/null)
    echo "$line" >> "$out"; one+=("$(echo "$line" | field images_per_second)")
    line=$("$bin" launch --nproc-per-node 2 --master-port 0 --no-prefix --log-level warn -- \
      "$bin" bench-train "${common[@]}" --batch-size $(( global / 2 )) --threads "$half" 2>/dev/null | grep '^{')
    echo "$line" >> "$out"; two+=("$(echo "$line" | field images_per_second)"); wait_on+=("$(echo "$line" | field median_comm_wait_ms)")
    line=$("$bin" launch --nproc-per-node 2 --master-port 0 --no-prefix --log-level warn -- \
      "$bin" bench-train "${common[@]}" --batch-size $(( global / 2 )) --threads "$half" --no-overlap 2>/dev/null | grep '^{')
    echo "$line" >> "$out"; noov+=("$(echo "$line" | field images_per_second)"); wait_off+=("$(echo "$line" | field median_comm_wait_ms)")
  done
  "$python" - "$c" "${one[*]}" "${two[*]}" "${noov[*]}" "${wait_on[*]}" "${wait_off[*]}" <<'PY'
import statistics as s, sys
case = sys.argv[1]
one, two, noov, won, woff = ([float(x) for x in a.split()] for a in sys.argv[2:7])
a, b, c, w1, w0 = s.median(one), s.median(two), s.median(noov), s.median(won), s.median(woff)
hidden = 1 - w1 / w0 if w0 > 0 else float("nan")
print(f"{case:<22} {a:10.1f} {b:10.1f} {c:10.1f} {b / a:7.2f}x {w1:9.1f} {w0:9.1f} {hidden:7.0%}")
PY
done
echo "records: $out (every line carries the commit, cpu, threads, world size, buckets and gradient bytes)"
echo "'hidden' = 1 - exposed all-reduce wait with overlap / wait when every bucket goes after backward"
