#!/usr/bin/env bash
# clang-tidy (.clang-tidy: bugprone, performance, a 60-statement function limit) on the C++ files
# changed since BASE, with the release build's compile commands (precompiled-header flags removed:
# clang cannot read GCC's .gch). Headers are checked through the sources that include them.
# Usage: scripts/tidy.sh [BASE]   BASE: a commit (default: the one in .ci/tidy-base: every file
#                                 changed between the clang-format commit and it was checked clean
#                                 when it landed, so CI checks what changed since);
#                                 `all` checks every source file (about 10 s per torch TU)
# Exit status: 0 clean (or nothing to check), 1 findings, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-$(cat .ci/tidy-base)}
db=build/release/compile_commands.json
[[ -f $db ]] || { echo "tidy.sh: no $db (bash scripts/build.sh release first)" >&2; exit 2; }
command -v clang-tidy > /dev/null || { echo "tidy.sh: no clang-tidy (bash scripts/bootstrap.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$db" "$work/compile_commands.json" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))
for e in entries:
    e["command"] = re.sub(r" -include \S+cmake_pch\.hxx| -Winvalid-pch", "", e["command"])
json.dump(entries, open(sys.argv[2], "w"))
PY
if [[ $base == all ]]; then
  mapfile -t files < <(git ls-files 'src/*.cpp' 'tools/*.cpp')
else
  git rev-parse --verify --quiet "$base^{commit}" > /dev/null || { echo "tidy.sh: no commit '$base'" >&2; exit 2; }
  mapfile -t files < <(git diff --name-only --diff-filter=d "$base" -- 'src/*.cpp' 'tools/*.cpp')
fi
[[ ${#files[@]} -gt 0 ]] || { echo "tidy.sh: no changed source files since $base"; exit 0; }
start=$SECONDS
# Sources the release build does not compile (the CUDA-only ones) have no compile command here.
checkable=()
for f in "${files[@]}"; do
  if grep -q "\"file\": \"$PWD/$f\"" "$work/compile_commands.json"; then checkable+=("$f")
  else echo "tidy.sh: $f: not in the release build, skipped"; fi
done
[[ ${#checkable[@]} -gt 0 ]] || { echo "tidy.sh: nothing the release build compiles changed since $base"; exit 0; }
# One clang-tidy per core; xargs exits non-zero when any of them reported findings.
status=0
printf '%s\n' "${checkable[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$work" --quiet 2> /dev/null || status=1
echo "tidy.sh: ${#checkable[@]} files in $(( SECONDS - start )) s: $([[ $status == 0 ]] && echo clean || echo findings above)"
exit $status
