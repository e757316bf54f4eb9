#!/usr/bin/env bash
# Load test of `shoplens serve` on loopback (docs/SERVING.md): for each server configuration, an
# open-loop Poisson sweep over request rates (scripts/bench/serve_load.py), printing p50/p95/p99
# and goodput under the SLO side by side. The client runs on the same machine as the server.
# The server computes on 1 thread by default: on a 2-core machine shared with other work, 2 OpenMP
# threads stall on each other (batch-1 latency measured 11 ms with 1 thread, 180-430 ms with 2).
#
# Usage: scripts/bench/serve.sh [--model M] [--size S] [--rates "5 10 20"] [--requests N]
#                               [--slo-ms 100] [--threads T] [--dir DIR] [--out FILE] [CONFIG ...]
#   CONFIG = label=serve flags, e.g. 'b1=--max-batch 1' 'p95=--max-batch 32 --p95-target-ms 100'
#            (default: b1=--max-batch 1 --max-queue-delay-ms 0, fixed=--max-batch 16
#            --max-queue-delay-ms 5, p95=--max-batch 32 --p95-target-ms SLO)
#   --model     the model served, trained one step and exported (default resnet18)
#   --size      its image size (default 64)
#   --rates     the request rates per second swept (default "25 50 75 100 150")
#   --requests  requests per rate and configuration (default 400)
#   --slo-ms    the latency SLO of goodput (default 100)
#   --threads   the server's compute threads (default 1)
#   --dir       catalog, shards, model and server logs, made once and reused (default bench-serve/)
#   --out       JSON-lines records (default serve_bench.jsonl)
# Binary and Python from $SHOPLENS_BIN (default build/release/bin/shoplens) and $SHOPLENS_PYTHON
# (default /usr/bin/python3).
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
model=resnet18 size=64 rates="25 50 75 100 150" requests=400 slo=100 threads=1 dir=bench-serve out=serve_bench.jsonl
configs=()
parse_options 'model= size= rates= requests= slo-ms=slo threads= dir= out= @configs' "$@"
[[ ${#configs[@]} -eq 0 ]] && configs=("b1=--max-batch 1 --max-queue-delay-ms 0" \
  "fixed=--max-batch 16 --max-queue-delay-ms 5" "p95=--max-batch 32 --p95-target-ms $slo")
require_bin
mkdir -p "$dir"
catalog_and_shards "$dir" --num-images 200 --image-size-range 300:800 --seed 17 -- --storage-size 64 >/dev/null
model_dir=$dir/model-$model-$size
if [[ ! -f $model_dir/model_card.json ]]; then  # weights do not matter for speed: one training step
  rm -rf "$dir/run-$model-$size"
  "$bin" train --shards "$dir/shards" --out "$dir/run-$model-$size" --model "$model" --max-steps 1 --epochs 1 \
    -b 8 --set "augment.image_size=$size" --set train.tensorboard=false >/dev/null 2>&1
  "$bin" export --run "$dir/run-$model-$size" --out "$model_dir" >/dev/null 2>&1
fi
images=$dir/catalog  # bodies: the catalog's JPEG/PNG files
: > "$out"
# Every configuration's server runs at once (idle ones cost nothing), and each rate is run against
# them back to back: drift in the machine's load then hits all configurations alike.
labels=() ports=() pids=()
for config in "${configs[@]}"; do
  label=${config%%=*} flags=${config#*=}
  rm -f "$dir/port-$label"
  # shellcheck disable=SC2086
  "$bin" serve --weights "$model_dir" --port 0 --port-file "$dir/port-$label" --threads "$threads" $flags \
    > "$dir/serve-$label.log" 2>&1 &  # the log keeps the warm-up latency curve
  pids+=($!)
  for _ in $(seq 600); do
    [[ -s $dir/port-$label ]] && "$python" -c "import http.client,sys; c=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]),timeout=2); c.request('GET','/readyz'); sys.exit(c.getresponse().status!=200)" "$(cat "$dir/port-$label")" 2>/dev/null && break
    sleep 0.5
  done
  labels+=("$label") ports+=("$(cat "$dir/port-$label")")
done
for rate in $rates; do
  for i in "${!labels[@]}"; do
    "$python" scripts/bench/serve_load.py --port "${ports[$i]}" --rate "$rate" --requests "$requests" \
      --images "$images" --slo-ms "$slo" --label "${labels[$i]}" | tee -a "$out"
  done
done
for i in "${!pids[@]}"; do
  kill -TERM "${pids[$i]}"; wait "${pids[$i]}" || echo "server ${labels[$i]} exited $?" >&2
done
"$python" - "$out" "$slo" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = list(dict.fromkeys(r["label"] for r in rows))
rates = sorted({r["rate"] for r in rows})
by = {(r["label"], r["rate"]): r for r in rows}
f = lambda v: "-" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}"
head = "| rate/s | " + " | ".join(f"{l} p50 / p95 / p99 ms | {l} goodput/s (in SLO)" for l in labels) + " |"
print(head)
print("|" + "---|" * (1 + 2 * len(labels)))
for rate in rates:
    cells = []
    for l in labels:
        r = by.get((l, rate))
        if r is None:
            cells += ["", ""]
            continue
        cells.append(f"{f(r['p50_ms'])} / {f(r['p95_ms'])} / {f(r['p99_ms'])}")
        cells.append(f"{r['goodput']:.1f} ({100.0 * r['good_fraction']:.0f}%)")
    print(f"| {rate:g} | " + " | ".join(cells) + " |")
PY
