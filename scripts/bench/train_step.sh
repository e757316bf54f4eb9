#!/usr/bin/env bash
# Training-step throughput, shoplens (C++) vs Python PyTorch eager, side by side in one run:
# same model, batch, image size, dtype, optimizer and thread count; trials alternate between the
# two so machine noise hits both. Prints a table with the median ratio; writes JSON lines.
#
# Usage: scripts/bench/train_step.sh [--trials N] [--warmup N] [--steps N] [--timing T] [--out FILE] [CASE ...]
#   CASE = model:batch:image_size:threads[:precision[:cl[:optimizer[:impl]]]]   (precision fp32 or bf16,
#          default fp32; cl: channels-last, empty: not; optimizer adamw or sgd, default adamw; impl auto,
#          fused, foreach or reference, default auto: each side's default)
#          e.g. resnet50:128:224:16:bf16:cl:sgd   default cases: small_cnn:32:64:2 small_cnn:64:64:1 resnet18:16:112:2
#   --trials  alternating trials per side (default 3)
#   --warmup  unmeasured steps per trial (default 3); --steps  measured steps per trial (default 10)
#   --timing  step (each step reads its loss, median) or window (the steps as one window until the
#             device finished, mean: a training run's throughput; use it on a GPU) (default step)
#   --out     JSON-lines records (default train_step_bench.jsonl)
# Binary and Python from $SHOPLENS_BIN (default build/release/bin/shoplens) and $SHOPLENS_PYTHON
# (default /usr/bin/python3). Both run on the GPU when there is one (bench-train's rule).
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
trials=3 warmup=3 steps=10 timing=step out=train_step_bench.jsonl cases=()
parse_options 'trials= warmup= steps= timing= out= @cases' "$@"
[[ ${#cases[@]} -eq 0 ]] && cases=(small_cnn:32:64:2 small_cnn:64:64:1 resnet18:16:112:2)
require_bin
: > "$out"

printf '%-34s %12s %12s %7s\n' "case (model:batch:size:threads)" "shoplens/s" "pytorch/s" "ratio"
for c in "${cases[@]}"; do
  IFS=: read -r model batch size threads precision cl optimizer impl <<< "$c"
  flags=(--model "$model" --batch-size "$batch" --image-size "$size" --threads "$threads"
         --precision "${precision:-fp32}" --optimizer "${optimizer:-adamw}" --optimizer-impl "${impl:-auto}"
         --warmup-steps "$warmup" --steps "$steps" --timing "$timing")
  [[ ${cl:-} == cl ]] && flags+=(--channels-last)
  ours=() theirs=()
  for ((t = 0; t < trials; t++)); do
    line=$("$bin" bench-train "${flags[@]}" --format json 2>/dev/null)
    echo "$line" >> "$out"
    ours+=("$(echo "$line" | field images_per_second)")
    line=$("$python" scripts/bench/train_step_peer.py "${flags[@]}")
    echo "$line" >> "$out"
    theirs+=("$(echo "$line" | field images_per_second)")
  done
  "$python" - "$c" "${ours[*]}" "${theirs[*]}" <<'PY'
import statistics, sys
case, ours, theirs = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
a, b = statistics.median(ours), statistics.median(theirs)
print(f"{case:<34} {a:12.1f} {b:12.1f} {a / b:6.2f}x")
PY
done
echo "records: $out (commit, cpu and every parameter are in the shoplens lines)"
