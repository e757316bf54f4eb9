#!/usr/bin/env bash
# Sharded scoring on one machine: one `shoplens score` process over the whole catalog vs N
# processes over N shards (`score --shard I/N`, started together, then `score-merge`), trials
# alternating. Prints each side's wall seconds and images/s and the ratio (N processes / one),
# and checks that the merged predictions equal the single process's, row for row.
#
# Usage: scripts/bench/score_shards.sh [--shards N] [--trials N] [--images N] [--batch N] [--chunk-rows N]
#                                      [--workers N] [--threads N] [--dir DIR] [--weights MODEL_DIR]
#   --shards   processes of the sharded side (default 2)
#   --trials   alternating trials per side (default 3); --images  catalog size (default 1000)
#   --batch    micro-batch of every process (default 64)
#   --chunk-rows  score's --chunk-rows (default 100): shards are whole chunks, so an input of fewer
#              chunks than shards leaves some shards empty
#   --workers, --threads  decode workers and compute threads of EVERY process (default 1 and 1):
#              the single process is one device's job, each shard another device's
#   --dir      catalog and outputs (default bench-score; shares scripts/bench/score.sh's catalog)
#   --weights  an exported model (default DIR/model-small_cnn-64, made by scripts/bench/score.sh)
# Binary from $SHOPLENS_BIN (default build/release/bin/shoplens), Python from $SHOPLENS_PYTHON.
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
shards=2 trials=3 images=1000 batch=64 chunk_rows=100 workers=1 threads=1 dir=bench-score weights=""
parse_options 'shards= trials= images= batch= chunk-rows= workers= threads= dir= weights=' "$@"
require_bin
weights=${weights:-$dir/model-small_cnn-64}
[[ -f $weights/model_card.json ]] ||
  { echo "score_shards.sh: no exported model in $weights: run scripts/bench/score.sh first, or give --weights" >&2; exit 2; }
mkdir -p "$dir"
catalog_and_shards "$dir" --num-images "$images" --image-size-range 300:800 --seed 17 -- --storage-size 64 >/dev/null
common=(--weights "$weights" --input "$dir/catalog/manifest.csv" -b "$batch" --workers "$workers" --threads "$threads"
  --chunk-rows "$chunk_rows" --log-level warn)
single=() sharded=()
for ((t = 0; t < trials; t++)); do
  rm -rf "$dir/shards-one" "$dir/shards-n"
  start=$EPOCHREALTIME
  "$bin" score --out "$dir/shards-one" "${common[@]}" >/dev/null
  single+=("$start:$EPOCHREALTIME")
  start=$EPOCHREALTIME
  pids=()
  for ((i = 0; i < shards; i++)); do
    "$bin" score --out "$dir/shards-n" --shard "$i/$shards" "${common[@]}" >/dev/null & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  "$bin" score-merge "$dir/shards-n" --log-level warn >/dev/null
  sharded+=("$start:$EPOCHREALTIME")
  cmp -s "$dir/shards-one/predictions.csv" "$dir/shards-n/predictions.csv" ||
    { echo "score_shards.sh: the merged predictions differ from the single process's" >&2; exit 1; }
done
rows=$(field rows < "$dir/shards-one/report.json")
"$python" - "$rows" "$shards" "$(nproc)" "${single[*]}" "${sharded[*]}" <<'PY'
import statistics, sys
rows, shards, cores = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
seconds = lambda spans: [round(float(b) - float(a), 2) for a, b in (s.split(":") for s in spans.split())]
one, many = seconds(sys.argv[4]), seconds(sys.argv[5])
ratios = [a / b for a, b in zip(one, many)]
print(f"{rows} rows, {cores} cores; wall seconds per trial: 1 process {one}, {shards} processes + merge {many}")
print(f"1 process: {rows / statistics.median(one):.1f} images/s; {shards} processes: "
      f"{rows / statistics.median(many):.1f} images/s; ratio {statistics.median(ratios):.2f}x "
      f"(trials {min(ratios):.2f}-{max(ratios):.2f}x)")
PY
