#!/usr/bin/env bash
# Proves ShopLens's CUDA path on a GPU machine with the GPU kit (scripts/gpu/pack.sh), every
# measurement side by side with its Python peer on the same card in the same call, in three calls
# of at most 10 minutes each (docs/GPU.md, "The GPU kit"):
#   --call 1  the kit (libraries, versions, the card), the gpu tests (shoplens_tests
#             --gtest_filter='Gpu*'), training-step img/s C++ vs Python eager, AMP bf16,
#             channels-last: resnet50 224 px b128, vit_base (ViT-B/16) 224 px b64, small_cnn 64 px b256
#   --call 2  find-batch, resnet50 224 px bf16, --memory-budget 24GiB: fit vs binsearch vs exact (the
#             true maximum) vs Lightning's BatchSizeFinder (binsearch) on torchvision's resnet50 with
#             the same memory fraction; then one epoch + validation at fit's batch with worst-case
#             augmentation, counting OOM retries
#   --call 3  the batch study (resnet18 128 px, 5 epochs, 3 seeds; b32 vs find-batch: img/s, train
#             time, time to the baseline's macro-F1, macro-F1 mean and spread); the recorder on the
#             same shards at b32 and auto (peak memory, NVML GPU utilisation, loader wait share), run
#             twice, the second gated against the first (--max-regression 5%); batch scoring in bf16,
#             C++ vs Python eager (img/s, p50/p95/p99 batch latency)
#   Data is made on the machine (make-data, prepare): 6000 images of 160-400 px stored at 256 px
#   for calls 2 and 3 (call 3 reuses call 2's on a machine still warm), 4000 of 300-800 px for
#   scoring.
#
# Usage: scripts/gpu/prove.sh --call 1|2|3|all [--cpu] [--kit DIR | --build DIR] [--out DIR]
#                             [--work DIR] [--python PATH] [--threads N] [--call-seconds N]
#   --call     which call; all: 1, 2 and 3 in a row (the rehearsal's usual choice)
#   --cpu      the CPU rehearsal: every step of the call, the same commands and code paths, on the
#              CPU with tiny sizes: small_cnn 32 px, resnet18 64 px and vit_tiny 32 px for the
#              train step, small_cnn 32 px under a 64MiB budget for find-batch, the study, the
#              recorder and scoring, 300-image catalogs, Lightning with --max-trials 3
#   --kit      the GPU kit to run (default gpu-kit): its env.sh, binaries and scripts
#   --build    run a build folder's binaries instead of a kit (bin/shoplens; tests/shoplens_tests),
#              with this tree's scripts
#   --out      results (default $OUT when set, else prove-out): per call N, summary-callN.md (the
#              table, also printed last), results-callN.jsonl (every record), log-callN.txt (this
#              script's output), raw-callN.tar.gz (each step's outputs and logs)
#   --work     scratch folder: data, runs, raw outputs (default /tmp/shoplens-prove)
#   --python   the Python peer, with torch, torchvision and pytorch-lightning (default
#              $SHOPLENS_PYTHON, else python3)
#   --threads  CPU threads and loader workers of every run (default: all usable cores; --cpu: 1, as
#              pip torch's OpenMP on 2 threads of a busy 2-core machine ran a step 70x slower:
#              docs/GPU.md)
#   --call-seconds  the time one call may take (default 570: the device's 10-minute limit less a
#              margin; --cpu: 0, no limit); a step gets what is left, and a step that would get
#              less than its minimum is skipped and marked so in the table
# Exit status: 0 when every step ran and the tables list no problems (a measurement's own verdict,
# e.g. a regression found by the gate, is in the table), 1 when a step failed, timed out or was
# skipped or a table lists problems (a failed gpu test, OOM retries, ...), 2 on a usage error.
set -euo pipefail
# shellcheck source=../bench/lib/options.sh
source "$(dirname "${BASH_SOURCE[0]}")/../bench/lib/options.sh"
cd "$(dirname "$0")/../.."
repo=$PWD
# shellcheck source=common.sh
source scripts/gpu/common.sh
call="" cpu=0 kit=gpu-kit build="" out=${OUT:-prove-out} work=/tmp/shoplens-prove python=${SHOPLENS_PYTHON:-python3}
threads="" call_seconds=""
parse_options 'call= cpu! kit= build= out= work= python= threads= call-seconds=' "$@"
case "$call" in 1|2|3) calls=("$call") ;; all) calls=(1 2 3) ;;
  *) echo "prove.sh: --call 1, 2, 3 or all is required (try --help)" >&2; exit 2 ;; esac
command -v "$python" >/dev/null || { echo "prove.sh: no Python '$python' (pass --python)" >&2; exit 2; }
python=$(command -v "$python")
mkdir -p "$out" "$work"
out=$(cd "$out" && pwd) work=$(cd "$work" && pwd)
if [[ -n $(ls -A "$work") && ! -e $work/.shoplens-prove ]]; then
  echo "prove.sh: --work $work holds files and is not a prove.sh folder: pass an empty or new folder" >&2
  exit 2
fi
touch "$work/.shoplens-prove"

# The binaries and the scripts: the kit's (what was packed together), or a build's and this tree's.
if [[ -n $build ]]; then
  build=$(cd "$build" && pwd)
  export SHOPLENS_BIN=$build/bin/shoplens
  tests=$build/tests/shoplens_tests
  [[ -x $tests ]] || tests=$build/bin/shoplens_tests
  src=$repo
  export SHOPLENS_TEST_BIN=$SHOPLENS_BIN SHOPLENS_TEST_SOURCE_DIR=$src SHOPLENS_TEST_PYTHON=$python
  kit=""
else
  [[ -f $kit/env.sh ]] || { echo "prove.sh: no GPU kit at $kit: make it with scripts/gpu/pack.sh (or pass --build)" >&2; exit 2; }
  kit=$(cd "$kit" && pwd)
  # shellcheck disable=SC1091
  SHOPLENS_PYTHON=$python source "$kit/env.sh"
  tests=$kit/bin/shoplens_tests
  src=$kit/src
  export SHOPLENS_KIT_LD_LIBRARY_PATH
  # The kit runs the scripts packed with its binaries; say so when this tree's have moved on since.
  for d in scripts/gpu scripts/bench; do
    if [[ -d $repo/$d ]] && ! diff -rq -x __pycache__ "$repo/$d" "$src/$d" >/dev/null 2>&1; then
      echo "prove.sh: warning: $d differs from the kit's copy (packed $(date -r "$kit/manifest.json" '+%F %T')); the kit's runs: repack with scripts/gpu/pack.sh to run this tree's" >&2
    fi
  done
fi
[[ -x $SHOPLENS_BIN && -x $tests ]] || { echo "prove.sh: no $SHOPLENS_BIN or $tests" >&2; exit 2; }
export SHOPLENS_PYTHON=$python

# Sizes, each knob with its CPU-rehearsal value first and its GPU value second: the GPU's fit each
# call in its ten minutes on one H100/H200; the rehearsal's are tiny.
pick() { if [[ $cpu -eq 1 ]]; then echo "$1"; else echo "$2"; fi; }
device=$(pick cpu cuda)
threads=${threads:-$(pick 1 "$(nproc)")}
call_seconds=${call_seconds:-$(pick 0 570)}
read -r -a step_cases <<< "$(pick "small_cnn:8:32:$threads:bf16:cl resnet18:4:64:$threads:bf16:cl vit_tiny:4:32:$threads:bf16:cl" \
  "resnet50:128:224:$threads:bf16:cl resnet50:128:224:$threads:bf16:cl:sgd vit_base:64:224:$threads:bf16:cl small_cnn:256:64:$threads:bf16:cl")"
step_trials=$(pick 1 3) step_warmup=$(pick 1 10) step_steps=$(pick 2 30)
fb_model=$(pick small_cnn resnet50) fb_size=$(pick 32 224) budget=$(pick 64MiB 24GiB) lightning_trials=$(pick 3 25)
data_images=$(pick 300 6000) data_range=$(pick 48:96 160:400) data_storage=$(pick 40 256)
# The study trains 3 seeds x 2 arms: a lighter model than find-batch's so that each run gets enough
# epochs for its macro-F1 to mean something within the call.
study_model=$(pick small_cnn resnet18) study_size=$(pick 32 128) study_epochs=$(pick 1 5)
study_seeds=$(pick 2 3) study_baseline=$(pick 16 32) study_cap=$(pick 48 1024)
bench_steps=$(pick 3 20) bench_warmup=$(pick 1 5) bench_trials=$(pick 2 3)
score_case=$(pick "small_cnn:32:16:1:$threads:bf16:cpu:cl" "resnet50:224:256:$threads:$threads:bf16:cuda:cl")
score_images=$(pick 60 4000) score_trials=$(pick 1 3)
if [[ $cpu -eq 0 ]] && ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "prove.sh: $python sees no CUDA device; on a machine without a GPU run the rehearsal (--cpu)" >&2
  exit 2
fi
train_sets=(--set "model.name=$fb_model" --set "augment.image_size=$fb_size" --set train.precision=bf16
            --set model.channels_last=true --set "loader.workers=$threads")

# step NAME MIN_SECONDS LIMIT_SECONDS OK_CODES CMD...: runs CMD (a program or one of the functions
# below; output in $raw/NAME.log) under what is left of the call's time, records its status in
# $raw/steps.jsonl, and never stops the call.
step() {
  local name=$1 min=$2 limit=$3 ok_codes=$4 status rc=0 start=$SECONDS
  shift 4
  if [[ $call_seconds -gt 0 && $((call_seconds - (SECONDS - call_start) - 20)) -lt $limit ]]; then
    limit=$((call_seconds - (SECONDS - call_start) - 20))
  fi
  if [[ $limit -lt $min ]]; then
    status=skipped rc=-1
    echo "[call $n] $name: skipped, ${limit}s left of the call (needs ${min}s)"
  else
    echo "[call $n] $name (limit ${limit}s): $*"
    echo "\$ $*" > "$raw/$name.log"
    if declare -F "$1" >/dev/null; then set -- bash -c '"$@"' prove.sh "$@"; fi  # exported below
    timeout --kill-after=10 "$limit" "$@" >> "$raw/$name.log" 2>&1 || rc=$?
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then status=timeout
    elif [[ ",$ok_codes," == *",$rc,"* ]]; then status=ok
    else status=failed; fi
    echo "[call $n] $name: $status (exit $rc) in $((SECONDS - start)) s"
    [[ $status == ok ]] || tail -n 15 "$raw/$name.log" | sed 's/^/    /'
  fi
  printf '{"step": "%s", "status": "%s", "exit": %d, "seconds": %d, "limit": %d, "log": "%s.log"}\n' \
    "$name" "$status" "$rc" "$((SECONDS - start))" "$limit" "$name" >> "$raw/steps.jsonl"
}

# The catalog and shards of calls 2 and 3, made once per machine.
# shellcheck disable=SC2317  # make_data, device_info and kit_check run through step
make_data() {
  local d=$work/data want="make-data --num-images $data_images --image-size-range $data_range --seed 11; prepare --storage-size $data_storage"
  if [[ -f $d/shards/dataset.json && $(cat "$d/made-with" 2>/dev/null) == "$want" ]]; then
    echo "reusing $d: $want"
    return 0
  fi
  rm -rf "$d" && mkdir -p "$d"
  "$SHOPLENS_BIN" make-data --out "$d/catalog" --num-images "$data_images" --image-size-range "$data_range" \
    --seed 11 --threads "$threads"
  "$SHOPLENS_BIN" prepare --input "$d/catalog/manifest.csv" --out "$d/shards" --storage-size "$data_storage" \
    --threads "$threads"
  echo "$want" > "$d/made-with"
}

# shellcheck disable=SC2317
device_info() {  # every call: the card, the software, the settings that move the figures
  "$python" - "$raw/device.json" "$SHOPLENS_BIN" <<'PY'
import json, os, subprocess, sys, torch, torchvision
out, binary = sys.argv[1:]
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "torchvision": torchvision.__version__,
        "cuda_available": torch.cuda.is_available(), "cpus": len(os.sched_getaffinity(0)),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "shoplens": " / ".join(sh(binary, "--version").splitlines()),
        "driver": sh("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") or "no nvidia-smi"}
try:
    import pytorch_lightning
    info["lightning"] = pytorch_lightning.__version__
except ImportError as e:
    info["lightning"] = f"missing ({e})"
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(device_name=p.name, total_memory_bytes=p.total_memory, multiprocessors=p.multi_processor_count,
                capability=f"{p.major}.{p.minor}")
json.dump(info, open(out, "w"), indent=1)
print(json.dumps(info))
PY
  nvidia-smi 2>&1 || true
}

# shellcheck disable=SC2317
kit_check() {  # call 1: the kit resolves its libraries here, and what it is
  [[ -n $kit ]] || { echo "no kit (--build): nothing to check"; return 0; }
  "$python" "$src/scripts/gpu/kit_libs.py" check --kit "$kit" "$kit/libexec/shoplens" "$kit/libexec/shoplens_tests"
  LD_BIND_NOW=1 "$SHOPLENS_BIN" --version
  cat "$kit/manifest.md"
}

bench_config() {  # the recorder's scenarios: the study's shards at the baseline batch and at auto
  cat > "$raw/bench.json" <<JSON
{"format": "shoplens-bench", "name": "prove-call3-$device",
 "note": "scripts/gpu/prove.sh call 3: $fb_model $fb_size px bf16 channels-last on prepared shards through the training loader, batch $study_baseline and find-batch's under $budget",
 "defaults": {"model": "$fb_model", "image_size": $fb_size, "precision": "bf16", "channels_last": true, "device": "$device",
              "threads": $threads, "loader_workers": $threads, "data": "shards", "shards": "$work/data/shards",
              "memory_budget": "$budget", "warmup_steps": $bench_warmup, "steps": $bench_steps, "trials": $bench_trials},
 "matrix": {"batch": [$study_baseline, "auto"]}}
JSON
}

# The steps that are functions run in a child bash (under timeout): they and what they read go along.
export -f device_info kit_check make_data
export python src tests kit work threads data_images data_range data_storage

status_all=0
for n in "${calls[@]}"; do
  call_start=$SECONDS
  export raw=$work/call$n
  replace_dir "$raw" .shoplens-prove
  exec 3>&1 4>&2
  exec > >(tee "$out/log-call$n.txt") 2>&1
  tee_pid=$!
  echo "prove.sh call $n ($([[ $cpu -eq 1 ]] && echo "CPU rehearsal" || echo GPU)): $SHOPLENS_BIN, $python, $threads threads, raw $raw"
  step device 5 60 0 device_info
  case $n in
    1)
      step kit 5 60 0 kit_check
      step gpu-tests 30 240 0 "$tests" --gtest_filter='Gpu*' --gtest_output="json:$raw/gpu_tests.json"
      # window: a training run's throughput, the host queueing ahead (docs/PERFORMANCE.md)
      step train-step 60 420 0 bash "$src/scripts/bench/train_step.sh" --trials "$step_trials" --warmup "$step_warmup" \
        --steps "$step_steps" --timing window --out "$raw/train_step.jsonl" "${step_cases[@]}"
      ;;
    2)
      step data 20 150 0 make_data
      mkdir -p "$work/find-batch"
      ln -sfn "$work/data/catalog" "$work/find-batch/catalog"
      ln -sfn "$work/data/shards" "$work/find-batch/shards"
      step find-batch 60 330 0 bash "$src/scripts/bench/find_batch.sh" --budget "$budget" --threads "$threads" \
        --precision bf16 --device "$device" --set model.channels_last=true --dir "$work/find-batch" \
        --out "$raw/find_batch.jsonl" --bin "$SHOPLENS_BIN" "$fb_model:$fb_size"
      step lightning 30 200 0 "$python" "$src/scripts/gpu/lightning_batch_finder.py" --model "$fb_model" \
        --image-size "$fb_size" --precision bf16 --channels-last --memory-budget "$budget" --mode binsearch \
        --max-trials "$lightning_trials" --threads "$threads" --out "$raw/lightning.json"
      ;;
    3)
      step data 20 150 0 make_data
      step study 60 300 0 "$SHOPLENS_BIN" bench --study batch --shards "$work/data/shards" --out "$raw/study" \
        --epochs "$study_epochs" --seeds "$study_seeds" --baseline-batch "$study_baseline" --memory-budget "$budget" \
        --threads "$threads" "${train_sets[@]}" --set "model.name=$study_model" --set "augment.image_size=$study_size" \
        --set "find_batch.max_batch=$study_cap"
      bench_config
      step bench 30 120 0 "$SHOPLENS_BIN" bench --config "$raw/bench.json" --out "$raw/bench-a"
      # The gate's own verdict (exit 1: a regression or a failed scenario) is a result, in the table.
      step bench-gate 30 120 0,1 "$SHOPLENS_BIN" bench --config "$raw/bench.json" --out "$raw/bench-b" \
        --baseline "$raw/bench-a/results.jsonl" --max-regression 5%
      step score 30 200 0 bash "$src/scripts/bench/score.sh" --trials "$score_trials" --images "$score_images" \
        --dir "$work/score" --out "$raw/score.jsonl" "$score_case"
      ;;
  esac
  "$python" "$src/scripts/gpu/prove_report.py" --call "$n" --raw "$raw" --out "$out" \
    --mode "$([[ $cpu -eq 1 ]] && echo cpu || echo gpu)" --kit "${kit:-}" --seconds $((SECONDS - call_start)) || status_all=1
  (cd "$raw" && find . -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' -o -name '*.html' \
     -o -name '*.csv' -o -name '*.xml' -o -name '*.txt' \) -size -4M -print0 | tar -czf "$out/raw-call$n.tar.gz" --null -T -)
  grep -q '"status": "\(failed\|timeout\|skipped\)"' "$raw/steps.jsonl" && status_all=1
  echo "call $n took $((SECONDS - call_start)) s; results in $out"
  echo
  cat "$out/summary-call$n.md"
  exec 1>&3 2>&4 3>&- 4>&-
  wait "$tee_pid" 2>/dev/null || true
done
exit $status_all
