# shellcheck shell=bash
# Sourced by the tests of tests/scripts: `root` (this checkout), `tmp` (a folder removed on exit),
# the counters, and `expect WHAT EXPECTED ACTUAL`, which counts a check and prints a failure.
# A test ends with `finish NAME [DETAIL]`: the counts, and its exit status.
set -uo pipefail
# shellcheck disable=SC2034  # used by the test that sources this
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checks=0 failures=0

# expect WHAT EXPECTED ACTUAL
expect() {
  checks=$((checks + 1))
  if [[ $2 != "$3" ]]; then
    failures=$((failures + 1))
    printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"
  fi
}

# finish NAME [DETAIL]: prints the counts; the status is the test's
finish() {
  echo "$1: $checks checks, $failures failed${2:+ ($2)}"
  [[ $failures -eq 0 ]]
}
