#!/usr/bin/env bash
# Code checks that need no build, run by scripts/test.sh before the builds (seconds):
#   function length: no function in src/ or tools/ longer than 80 lines (lizard counts from the
#   signature to the closing brace). scripts/function_length_allowlist.txt lists the functions
#   still over the limit; the list only shrinks: a function not on it that grows past 80 fails, and
#   so does an entry that is no longer needed (delete its line).
#   format: every tracked C++ file is as clang-format (.clang-format) writes it; fix with
#   `git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format -i`.
#   one definition: no namespace-level type is defined twice under one name (scripts/check_one_definition.py).
#   layers: every include of a ShopLens header points down the layer order, or along one of the few
#   sideways edges listed with their reasons (scripts/check_layers.py; CONTRIBUTING.md).
#   shell: every tracked shell script is shellcheck clean (sourced files followed from the script's
#   own folder).
# Usage: scripts/check_code.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh  # python3-venv on a fresh machine
limit=80
tools=$(bash scripts/venv.sh tools | tail -n 1)
allow=scripts/function_length_allowlist.txt
functions=$(mktemp)
trap 'rm -f "$functions"' EXIT
"$tools/bin/lizard" --csv -l cpp src tools > "$functions"
/usr/bin/python3 - "$limit" "$allow" "$functions" <<'PY'
import csv, sys
limit, allow_file, functions = int(sys.argv[1]), sys.argv[2], sys.argv[3]
allowed = {line.split('#')[0].strip() for line in open(allow_file)} - {''}
long = {}
for row in csv.reader(open(functions)):
    length, file, name = int(row[4]), row[6], row[7]
    if length > limit:
        long[f"{file}:{name}"] = (length, row[9])
new = sorted(k for k in long if k not in allowed)
stale = sorted(k for k in allowed if k not in long)
for k in new:
    print(f"check_code: {k.split(':')[0]}:{long[k][1]}: {k.split(':', 1)[1]} is {long[k][0]} lines, over {limit}: split it by phase")
for k in stale:
    print(f"check_code: {k} is no longer over {limit} lines: delete it from {allow_file}")
print(f"check_code: {len(long)} functions over {limit} lines, {len(allowed)} allowed")
sys.exit(1 if new or stale else 0)
PY
/usr/bin/python3 scripts/check_one_definition.py
/usr/bin/python3 scripts/check_layers.py
unformatted=$(git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format --style=file --dry-run 2>&1 | grep -oE '^[^:]+\.(cpp|h|cu):' | sort -u | tr -d ':' || true)
if [[ -n $unformatted ]]; then
  echo "check_code: not as clang-format writes them (git ls-files '*.cpp' '*.h' '*.cu' | xargs clang-format -i):"
  echo "${unformatted//$'\n'/$'\n'  }" | sed '1s/^/  /'
  exit 1
fi
echo "check_code: every C++ file is clang-format clean"
mapfile -t scripts < <(git ls-files '*.sh')
shellcheck -x -P SCRIPTDIR "${scripts[@]}"
echo "check_code: ${#scripts[@]} shell scripts shellcheck clean"
