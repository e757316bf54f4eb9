#!/usr/bin/env bash
# Text training-step time, shoplens (C++) vs Python PyTorch eager, side by side in one run: the
# same text encoder (scripts/bench/text_step.py mirrors TextEncoderNet), batch, sequence length,
# vocabulary, optimizer and thread count; trials alternate between the two so machine noise hits
# both. Prints the median step times and their ratio (pytorch / shoplens: above 1, shoplens is
# faster); writes every run as a JSON line.
#
# shoplens tunes glibc malloc at start-up (docs/PERFORMANCE.md); --same-malloc gives the Python
# peer the same settings through the environment, to isolate the per-op overhead.
#
# Usage: scripts/bench/text_step.sh [--trials N] [--out FILE] [--same-malloc] [CASE ...]
#   CASE = model:batch:seq_len:threads   default cases: text_tiny:16:256:2 text_tiny:32:128:2
#   --trials       alternating trials per side (default 3)
#   --out          JSON-lines records (default text_step_bench.jsonl)
#   --same-malloc  the Python peer runs with shoplens's malloc settings (default: glibc's)
# Binary and Python from $SHOPLENS_BIN (default build/release/bin/shoplens) and $SHOPLENS_PYTHON
# (default /usr/bin/python3).
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
trials=3 out=text_step_bench.jsonl same_malloc=0 cases=()
parse_options 'trials= out= same-malloc! @cases' "$@"
[[ ${#cases[@]} -eq 0 ]] && cases=(text_tiny:16:256:2 text_tiny:32:128:2)
peer_env=()
[[ $same_malloc -eq 1 ]] && peer_env=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=2147483647)
require_bin
: > "$out"

printf '%-30s %14s %14s %8s %14s\n' "case (model:batch:len:thr)" "shoplens ms" "pytorch ms" "ratio" "shoplens tok/s"
for c in "${cases[@]}"; do
  IFS=: read -r model batch len threads <<< "$c"
  common=(--model "$model" --seq-len "$len" --threads "$threads" --vocab-size 8192 --warmup-steps 3 --steps 10)
  ours=() theirs=() tokens=()
  for ((t = 0; t < trials; t++)); do
    line=$("$bin" bench-train "${common[@]}" --batch-size "$batch" --num-classes 2 --format json 2>/dev/null)
    echo "$line" >> "$out"
    ours+=("$(echo "$line" | field median_step_ms)")
    tokens+=("$(echo "$line" | field tokens_per_second)")
    line=$(env "${peer_env[@]}" "$python" scripts/bench/text_step.py "${common[@]}" --batch-size "$batch" --num-classes 2)
    echo "$line" >> "$out"
    theirs+=("$(echo "$line" | field median_step_ms)")
  done
  "$python" - "$c" "${ours[*]}" "${theirs[*]}" "${tokens[*]}" <<'PY'
import statistics, sys
case = sys.argv[1]
ours, theirs, tokens = ([float(x) for x in a.split()] for a in sys.argv[2:5])
a, b = statistics.median(ours), statistics.median(theirs)
print(f"{case:<30} {a:14.1f} {b:14.1f} {b / a:7.2f}x {statistics.median(tokens):14.0f}")
print(f"  trials: shoplens {' '.join(f'{x:.1f}' for x in ours)} ms; pytorch {' '.join(f'{x:.1f}' for x in theirs)} ms")
PY
done
echo "records: $out (commit, cpu and every parameter are in the shoplens lines)"
