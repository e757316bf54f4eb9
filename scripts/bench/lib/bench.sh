# shellcheck shell=bash
# Shared by the scripts of scripts/bench (sourced, not run): the option parser (options.sh) and
# the steps several benchmarks take. Source it before the script changes folder. It sets
#   bin     the shoplens binary: $SHOPLENS_BIN, else build/release/bin/shoplens
#   python  the Python peer: $SHOPLENS_PYTHON, else /usr/bin/python3

# shellcheck source=options.sh
source "$(dirname "${BASH_SOURCE[0]}")/options.sh"

bin=${SHOPLENS_BIN:-build/release/bin/shoplens}
python=${SHOPLENS_PYTHON:-/usr/bin/python3}

# require_bin: exit 2 unless $bin is an executable. --help says how to name another: every script's
# header names SHOPLENS_BIN, or its --bin option.
require_bin() {
  [[ -x $bin ]] || { echo "no $bin: run scripts/build.sh first, or name another binary (see --help)" >&2; exit 2; }
}

# field KEY: prints KEY of the JSON object on stdin, as Python prints it.
field() {
  "$python" -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"
}

# catalog_and_shards [--logs DIR] DATA [make-data options] -- [prepare options]: DATA/catalog from
# `shoplens make-data` unless DATA/catalog/manifest.csv is there, then DATA/shards from it with
# `shoplens prepare` unless DATA/shards/dataset.json is there: made once, reused by later runs.
# Output goes where the caller sends it, or with --logs to DIR/make-data.log and DIR/prepare.log
# (written only by a step that runs).
catalog_and_shards() {
  local logs="" data make=()
  if [[ $1 == --logs ]]; then logs=$2; shift 2; fi
  data=$1
  shift
  while [[ $# -gt 0 && $1 != -- ]]; do make+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  if [[ ! -f $data/catalog/manifest.csv ]]; then
    _bench_logged "${logs:+$logs/make-data.log}" "$bin" make-data --out "$data/catalog" "${make[@]}"
  fi
  if [[ ! -f $data/shards/dataset.json ]]; then
    _bench_logged "${logs:+$logs/prepare.log}" "$bin" prepare --input "$data/catalog/manifest.csv" --out "$data/shards" "$@"
  fi
}

# _bench_logged LOG CMD...: runs CMD, its stdout and stderr to LOG when LOG is not empty.
_bench_logged() {
  local log=$1
  shift
  if [[ -n $log ]]; then "$@" > "$log" 2>&1; else "$@"; fi
}
