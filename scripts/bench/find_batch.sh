#!/usr/bin/env bash
# find-batch under a memory budget (CPU: the tracking allocator; CUDA: the caching allocator with
# its memory fraction): our `fit` strategy against Lightning's binsearch (reproduced in the same
# tool) and `exact` (doubling + bisection to a gap of 1 on the pure out-of-memory criterion: the
# true maximum), each with --no-cache --format json; then, per
# model, one real epoch + validation (and the test split) at the batch `fit` found, with
# worst-case augmentation under the same budget, counting OOM retries (goal: 0).
#
# Usage: scripts/bench/find_batch.sh [--budget 2GiB] [--threads 2] [--precision fp32] [--device auto]
#                                    [--set KEY=VALUE]... [--images 3000] [--storage-size 128]
#                                    [--dir DIR] [--out FILE] [--bin PATH] [--no-epoch]
#                                    [--strategies fit,binsearch,exact] [CASE ...]
#   CASE      model:image_size      default: small_cnn:64 resnet18:96
#             model:tokens=LENGTH   a text model (text_tiny, text_small, text_base) on synthetic
#                                   tokens of text.max_length LENGTH, vocabulary --vocab
#   --vocab   text.vocab_size of the text cases (default 30522, BERT's)
#   --budget  train.memory_budget for every run (default 2GiB; on CUDA the caching allocator's
#             memory fraction is set to it, so a 24GiB budget on an 80 GiB card acts as a 24 GiB card)
#   --threads run.threads (and loader workers) for every run (default 2)
#   --precision  train.precision of every run: fp32 (default), bf16, fp16 (CUDA)
#   --device  train.device of every run: auto (default), cpu, cuda
#   --set     more config overrides for every find-batch and train run (repeatable), e.g.
#             model.channels_last=true
#   --images, --storage-size  the epoch's catalog (make-data --num-images, default 3000) and its
#             shards' short side (prepare --storage-size, default 128)
#   --dir     working folder (default bench-find-batch/): per-run JSON and logs, the catalog and
#             shards (made once, reused), the train runs, the find-batch cache
#   --out     JSON-lines records, one per run (default DIR/find_batch_bench.jsonl)
#   --bin     the shoplens binary (default $SHOPLENS_BIN, else build/release/bin/shoplens)
#   --no-epoch  skip the training epochs
#   --strategies  which searches to run per case (default fit,binsearch,exact; `exact` gives the
#             true maximum that `% exact` divides by, so keep it for a grid of found/true-max)
# Example with a binary built elsewhere:
#   LD_LIBRARY_PATH=/path/lib scripts/bench/find_batch.sh --bin /path/shoplens --dir /tmp/fb
# Targets (issue 4): fit >= 97% of exact, <= 5 probes, fewer probes and less time than binsearch;
# oom_retries = 0 in the epoch. Takes about 40 minutes on a (busy) 2-core machine, most of it in
# binsearch and exact, whose probes sit near the maximum.
set -euo pipefail
# shellcheck source=lib/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench.sh"
cd "$(dirname "$0")/../.."
budget=2GiB threads=2 precision=fp32 device=auto images=3000 storage=128 dir=bench-find-batch out="" epoch=1 vocab=30522
strategies=fit,binsearch,exact
cases=() sets=()
parse_options 'budget= threads= precision= device= set+sets images= vocab= storage-size=storage dir= out= bin=
               no-epoch!epoch=0 strategies= @cases' "$@"
[[ ${#cases[@]} -eq 0 ]] && cases=(small_cnn:64 resnet18:96)
require_bin
mkdir -p "$dir/logs"
out=${out:-$dir/find_batch_bench.jsonl}
: > "$out"

# What every record carries: where and with what it ran.
env_json=$("$python" - "$bin" "$budget" "$threads" "$dir" "$precision" "$device" "${sets[*]:-}" <<'PY'
import json, os, subprocess, sys
binary, budget, threads, d, precision, device, sets = sys.argv[1:]
def sh(*cmd):
    try: return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except Exception: return "unknown"
cpu = "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip(); break
print(json.dumps({"commit": sh("git", "rev-parse", "--short", "HEAD"),
                  "binary": os.path.abspath(binary), "binary_version": sh(binary, "--version").splitlines()[0] if sh(binary, "--version") != "unknown" else "unknown",
                  "date": sh("date", "-u", "+%Y-%m-%dT%H:%M:%SZ"), "cpu_model": cpu, "cpus": os.cpu_count(),
                  "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
                  "budget": budget, "threads": int(threads), "dir": d, "precision": precision,
                  "device_option": device, "overrides": sets.replace("--set ", "").split()}))
PY
)

common=(--memory-budget "$budget" --threads "$threads" --precision "$precision" --device "$device" --no-cache --format json
        --set "find_batch.cache_dir=$dir/cache" --set "loader.workers=$threads" "${sets[@]}")

echo "find-batch, budget $budget, $precision, $threads threads; per-run JSON and logs in $dir/"
printf '%-10s %5s %-10s %6s %8s %7s %9s %10s\n' model size strategy batch "% exact" probes seconds "peak MiB"
for c in "${cases[@]}"; do
  IFS=: read -r model size <<< "$c"
  input=(--image-size "$size")
  if [[ $size == tokens=* ]]; then
    size=${size#tokens=}
    input=(--set "text.max_length=$size" --set "text.vocab_size=$vocab")
  fi
  for strategy in ${strategies//,/ }; do
    cmd=("$bin" find-batch -m "$model" "${input[@]}" --strategy "$strategy" "${common[@]}")
    if ! "${cmd[@]}" > "$dir/$model-$size-$strategy.json" 2> "$dir/logs/$model-$size-$strategy.log"; then
      echo "find-batch failed: ${cmd[*]} (see $dir/logs/$model-$size-$strategy.log)" >&2
      exit 1
    fi
    printf '%s\n' "${cmd[*]}" > "$dir/$model-$size-$strategy.cmd"
  done
  "$python" - "$dir" "$model" "$size" "$out" "$env_json" "$strategies" <<'PY'
import json, sys
d, model, size, out, env, strategies = sys.argv[1:]
env = json.loads(env)
runs = {s: json.load(open(f"{d}/{model}-{size}-{s}.json")) for s in strategies.split(",")}
exact = runs["exact"]["micro_batch"] if "exact" in runs else None
with open(out, "a") as f:
    for s, r in runs.items():
        pct = 100.0 * r["micro_batch"] / exact if exact else float("nan")
        peak = r.get("measured_peak_bytes", 0)
        peak = f"{peak / 2**20:.0f}" if peak else "-"  # binsearch's answer (after its margin) never ran
        memory_probes = [p for p in r["probes"] if p.get("purpose", "memory") == "memory"]
        ladder = len(r["probes"]) - len(memory_probes)
        probes = f"{len(memory_probes)}+{ladder}" if ladder else str(len(memory_probes))
        print(f"{model:<10} {size:>5} {s:<10} {r['micro_batch']:6d} {pct:7.1f}% {probes:>7} "
              f"{r['total_seconds']:9.1f} {peak:>10}")
        text = bool(r.get("sequence_length"))
        rec = dict(env, kind="find-batch", model=model, image_size=None if text else int(size),
                   sequence_length=r.get("sequence_length") or None, token_budget=r.get("token_budget") or None, strategy=s,
                   command=open(f"{d}/{model}-{size}-{s}.cmd").read().strip(),
                   micro_batch=r["micro_batch"], found_batch=r.get("found_batch"), exact_max=exact,
                   percent_of_exact=round(pct, 2) if exact else None, probes=len(memory_probes),
                   throughput_probes=ladder, seconds=r["total_seconds"],
                   search_seconds=r.get("search_seconds"), budget_bytes=r["budget_bytes"],
                   headroom_bytes=r["headroom_bytes"], usable_bytes=r.get("usable_bytes"),
                   measured_peak_bytes=r.get("measured_peak_bytes"), predicted_peak_bytes=r.get("predicted_peak_bytes"),
                   fit=r["fit"], bisected=r.get("bisected"), warnings=r.get("warnings", []),
                   static_bytes_estimate=r.get("static_bytes_estimate"), loader_batches_held=r.get("loader_batches_held"),
                   probe_steps=r.get("probe_steps"), verify_steps=r.get("verify_steps"), device=r.get("device"),
                   torch=r.get("torch"), fingerprint=r.get("fingerprint"),
                   probe_list=[{k: p.get(k) for k in ("batch", "result", "peak_bytes", "step_spread_bytes", "steps",
                                                       "seconds", "images_per_second")} for p in r["probes"]])
        f.write(json.dumps(rec) + "\n")
fit, bs = runs.get("fit"), runs.get("binsearch")
def memory_probes_of(run):  # the search's probes; the throughput ladder's are counted apart ("5+3")
    return sum(1 for p in run["probes"] if p.get("purpose", "memory") == "memory")
checks = []
if fit and exact:
    checks.append(("fit >= 97% of exact", fit["micro_batch"] >= 0.97 * exact))
if fit:
    checks.append(("fit <= 5 memory probes", memory_probes_of(fit) <= 5))
if fit and bs:
    checks += [("fit fewer probes than binsearch", memory_probes_of(fit) < memory_probes_of(bs)),
               ("fit less time than binsearch", fit["total_seconds"] < bs["total_seconds"])]
print("  " + "; ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in checks))
PY
done

[[ $epoch -eq 1 ]] || { echo "records: $out"; exit 0; }

# One epoch + validation (+ test) at the batch fit found, worst-case augmentation, the same budget.
catalog_and_shards --logs "$dir/logs" "$dir" --num-images "$images" --image-size-range 160:400 --seed 11 --threads "$threads" \
  -- --storage-size "$storage" --threads "$threads"
echo
printf '%-10s %5s %6s %9s %11s %9s %9s %9s %9s\n' model image batch effective oom_retries "step img/s" "train s" "wall s" "val F1"
for c in "${cases[@]}"; do
  IFS=: read -r model size <<< "$c"
  if [[ $size == tokens=* ]]; then echo "$model: a text case, no epoch on the image catalog"; continue; fi
  batch=$(field micro_batch < "$dir/$model-$size-fit.json")
  rm -rf "$dir/run-$model-$size"
  cmd=("$bin" train --shards "$dir/shards" --out "$dir/run-$model-$size" -m "$model" --epochs 1 -b "$batch"
       --memory-budget "$budget" --threads "$threads" --precision "$precision" --device "$device"
       --set "augment.image_size=$size" --set augment.worst_case=true
       --set "loader.workers=$threads" --set train.tensorboard=false "${sets[@]}")
  status=0
  "${cmd[@]}" > "$dir/logs/train-$model-$size.log" 2>&1 || status=$?
  "$python" - "$dir/run-$model-$size/summary.json" "$model" "$size" "$batch" "$status" "$out" "$env_json" "${cmd[*]}" \
    "$images" "$storage" <<'PY'
import json, os, sys
path, model, size, batch, status, out, env, command, images, storage = sys.argv[1:]
env = json.loads(env)
rec = dict(env, kind="train-epoch", model=model, image_size=int(size), micro_batch=int(batch), exit_status=int(status),
           command=command, augment_worst_case=True, epochs=1,
           catalog=f"make-data --num-images {images} --image-size-range 160:400 --seed 11; prepare --storage-size {storage}")
if os.path.exists(path):
    s = json.load(open(path))
    val = s.get("final_val") or {}
    rec.update(status=s["status"], micro_batch_effective=s["micro_batch_effective"], oom_retries=s["oom_retries"],
               images_per_second=s["images_per_second"], train_seconds=s["train_seconds"],
               wall_seconds=s["wall_seconds_this_process"], steps=s["steps"], images_trained=s["images_trained"],
               peak_rss_bytes=s.get("peak_rss_bytes"), val_macro_f1=val.get("macro_f1"), test_macro_f1=s.get("test_macro_f1"))
    f1 = val.get("macro_f1")
    print(f"{model:<10} {size:>5} {int(batch):6d} {s['micro_batch_effective']:9d} {s['oom_retries']:11d} "
          f"{s['images_per_second']:9.1f} {s['train_seconds']:9.1f} {s['wall_seconds_this_process']:9.1f} "
          f"{f1 if f1 is None else round(f1, 3)!s:>9}")
else:
    rec.update(status="failed")
    print(f"{model:<10} {size:>5} {int(batch):6d}  train failed (exit {status}); see the log")
with open(out, "a") as f:
    f.write(json.dumps(rec) + "\n")
PY
done
echo "records: $out"
