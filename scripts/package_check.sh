#!/usr/bin/env bash
# The CPack packages of a build, made and then run from where a fresh runner would put them: the
# .tar.gz unpacked into an empty folder and the .deb's files extracted (dpkg-deb -x), each one's
# `shoplens --version` and a one-scenario `shoplens bench` run from another working folder with a
# bare environment (docs/BENCH.md, "Installing on a runner"). Prints the .deb's Depends.
#
# Usage: scripts/package_check.sh [BUILD_DIR] [--keep DIR]
#   BUILD_DIR  a configured and built folder (default build/release)
#   --keep     also copy the packages to DIR
# Exit status: 0 every package ran bench; 1 one did not; 2 no such build.
set -euo pipefail
build=build/release keep=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) build=$1; shift ;;
  esac
done
[[ -f $build/CPackConfig.cmake ]] || { echo "no $build/CPackConfig.cmake: build it first (scripts/build.sh)" >&2; exit 2; }
build=$(cd "$build" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cpack --config "$build/CPackConfig.cmake" -B "$work/packages" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; echo "cpack failed" >&2; exit 1; }
if [[ -n $keep ]]; then
  mkdir -p "$keep"
  cp "$work"/packages/*.tar.gz "$keep"/
  if compgen -G "$work/packages/*.deb" > /dev/null; then cp "$work"/packages/*.deb "$keep"/; fi
fi

cat > "$work/tiny.json" <<'JSON'
{"format": "shoplens-bench", "name": "package-check",
 "scenarios": [{"name": "tiny", "model": "small_cnn", "image_size": 16, "batch": 4, "num_classes": 3,
                "warmup_steps": 0, "steps": 1, "trials": 1, "threads": 1}]}
JSON

# check_program LABEL BIN: --version and a bench run, from an empty folder with a bare environment.
check_program() {
  local label=$1 bin=$2 run=$work/run-$1
  mkdir -p "$run"
  (cd "$run" && env -i PATH=/usr/bin:/bin HOME="$run" "$bin" --version) ||
    { echo "$label: $bin --version failed" >&2; exit 1; }
  (cd "$run" && env -i PATH=/usr/bin:/bin HOME="$run" "$bin" bench --config "$work/tiny.json" --out out \
     > bench.log 2>&1) || { cat "$run/bench.log" >&2; echo "$label: bench failed" >&2; exit 1; }
  grep -q '"name":"tiny"' "$run/out/results.jsonl" || { echo "$label: no result" >&2; exit 1; }
  echo "$label: bench ran from $bin"
}

tgz=$(ls "$work"/packages/shoplens-*.tar.gz)
mkdir "$work/tgz"
tar -xzf "$tgz" -C "$work/tgz"
check_program tar.gz "$(ls -d "$work"/tgz/shoplens-*)/bin/shoplens"
[[ -f $(ls -d "$work"/tgz/shoplens-*)/share/shoplens/configs/bench_ci.json ]] ||
  { echo "tar.gz: share/shoplens/configs missing" >&2; exit 1; }

if compgen -G "$work/packages/*.deb" > /dev/null; then
  deb=$(ls "$work"/packages/*.deb)
  dpkg-deb -x "$deb" "$work/deb"
  check_program deb "$work/deb/usr/bin/shoplens"
  echo "deb Depends: $(dpkg-deb -f "$deb" Depends)"
fi
echo "packages: $(find "$work/packages" -maxdepth 1 \( -name '*.tar.gz' -o -name '*.deb' \) -printf '%f ')"
