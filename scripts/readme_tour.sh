#!/usr/bin/env bash
# Runs README.md's Quick tour as written: every command of its ```sh blocks, in order, from the
# checkout's root (the tour itself makes a fresh folder and works there). Stops at the first
# command that fails and names its README line. The tour's folder is removed at the end unless
# --keep is given. Usage:
#   scripts/readme_tour.sh [--bin PATH] [--keep] [--print]
#     --bin PATH  the shoplens binary the tour runs (default: the README's, build/release/bin/shoplens):
#                 the README's one `bin=` line is the only line changed
#     --keep      leave the tour's folder (its path is printed)
#     --print     print the extracted script instead of running it
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin="" keep=0 print=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --print) print=1; shift ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "readme_tour.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
done

# The tour's code lines keep their README line numbers (other lines become empty), so $LINENO in a
# failure message is the README's line. Line 1 (the title) carries the shell's set-up instead.
script=$(mktemp)
trap 'rm -f "$script"' EXIT
awk -v bin="$bin" -v keep="$keep" '
  NR == 1 {
    print "set -eEuo pipefail; PS4='\''+ README.md:$LINENO: '\''; " \
          "trap '\''echo \"readme_tour: README.md line $LINENO failed (exit $?): $BASH_COMMAND\" >&2'\'' ERR; " \
          "trap '\''kill $(jobs -p) 2>/dev/null || true; " \
          (keep ? "echo \"readme_tour: the tour folder is ${tour:-not made}\"" : "[ -n \"${tour:-}\" ] && rm -rf \"$tour\"") \
          "'\'' EXIT; set -x"
    next
  }
  /^## / { in_tour = ($0 == "## Quick tour") }
  in_tour && /^```sh$/ { in_code = 1; print ""; next }
  in_code && /^```$/ { in_code = 0; print ""; next }
  in_code && bin != "" && /^bin=/ { print "bin=" bin; next }
  in_code { print; next }
  { print "" }
' "$repo/README.md" > "$script"
if ! grep -q '[^[:space:]]' <(tail -n +2 "$script"); then
  echo "readme_tour.sh: README.md has no \`\`\`sh block under \"## Quick tour\"" >&2
  exit 1
fi
if [ "$print" = 1 ]; then
  grep -n '[^[:space:]]' "$script"
  exit 0
fi
cd "$repo"
start=$SECONDS
bash "$script"
echo "readme_tour: every command of the Quick tour exited 0 in $(( SECONDS - start )) s"
