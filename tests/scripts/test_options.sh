#!/usr/bin/env bash
# Tests scripts/bench/lib/options.sh, the option parser of the scripts in scripts/bench and
# scripts/gpu: value options, flags, repeatable options, positional arguments, --, the errors
# (exit 2) and --help (the script's header, exit 0). Then every script of scripts/bench/*.sh and
# scripts/gpu/*.sh: each runnable one uses the parser, --help exits 0 and prints its header,
# --no-such-option exits 2 naming it; also from a copy laid out as the GPU kit's src/
# (scripts/gpu/pack.sh), run from another folder. Needs no build, GPU or network.
# ctest Scripts.Options (label unit); alone: bash tests/scripts/test_options.sh
# shellcheck source=harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

# run_in DIR SCRIPT ARGS...: runs SCRIPT in DIR; sets rc, out and err (the timeout: a script that
# went on past its parser would run a benchmark)
run_in() {
  (cd "$1" && shift && timeout 30 bash "$@" < /dev/null > "$tmp/out" 2> "$tmp/err")
  rc=$?
  out=$(cat "$tmp/out") err=$(cat "$tmp/err")
}
run() { run_in . "$@"; }

# The probe: a script like the real ones (header, set -euo pipefail, source, cd elsewhere).
cat > "$tmp/probe.sh" <<PROBE
#!/usr/bin/env bash
# The probe's header.
#
#   --x  a value (default 1)
set -euo pipefail
source "$root/scripts/bench/lib/options.sh"
cd /
x=1 bucket=25 epoch=1 flag=0 name=n
parse_options 'x= bucket-mb=bucket no-epoch!epoch=0 flag! name=
               set+sets @pos' "\$@"
for a in "\${sets[@]}" "\${pos[@]}"; do :; done  # empty arrays under set -u
echo "x=\$x bucket=\$bucket epoch=\$epoch flag=\$flag name=\$name"
echo "sets=\${#sets[@]}:\${sets[*]:-} pos=\${#pos[@]}:\${pos[*]:-}"
printf '[%s]' "\${sets[@]}" "\${pos[@]}"; echo
PROBE
sed 's/ @pos//' "$tmp/probe.sh" > "$tmp/nopos.sh"

run "$tmp/probe.sh"
expect "defaults" "x=1 bucket=25 epoch=1 flag=0 name=n
sets=0: pos=0:
[]" "$out"
expect "defaults: exit 0" 0 "$rc"

run "$tmp/probe.sh" --x "a b" --bucket-mb 5 --name ""
expect "value options" "x=a b bucket=5 epoch=1 flag=0 name=" "${out%%$'\n'*}"

run "$tmp/probe.sh" --flag --no-epoch
expect "flags" "x=1 bucket=25 epoch=0 flag=1 name=n" "${out%%$'\n'*}"

run "$tmp/probe.sh" --set k=v --x 2 --set "q=r s"
expect "repeatable" "[--set][k=v][--set][q=r s]" "${out##*$'\n'}"
expect "repeatable: the others still parse" "x=2 bucket=25 epoch=1 flag=0 name=n" "${out%%$'\n'*}"

run "$tmp/probe.sh" p1 --x 3 "p 2" -- --flag -
expect "positionals, and all after --" "[p1][p 2][--flag][-]" "${out##*$'\n'}"
expect "positionals: flag after -- not set" "x=3 bucket=25 epoch=1 flag=0 name=n" "${out%%$'\n'*}"

run "$tmp/probe.sh" --x --flag
expect "a value that looks like an option is the value" "x=--flag bucket=25 epoch=1 flag=0 name=n" "${out%%$'\n'*}"

run "$tmp/probe.sh" --no-such-option
expect "unknown option: exit 2" 2 "$rc"
expect "unknown option: named" "probe.sh: unknown option --no-such-option (try --help)" "$err"
run "$tmp/probe.sh" -q
expect "unknown short option: exit 2" "2 probe.sh: unknown option -q (try --help)" "$rc $err"
run "$tmp/probe.sh" --x=1
expect "--name=value is not a form it takes" "2 probe.sh: unknown option --x=1 (try --help)" "$rc $err"

run "$tmp/probe.sh" --bucket-mb
expect "missing value: exit 2" 2 "$rc"
expect "missing value: said" "probe.sh: --bucket-mb needs a value (try --help)" "$err"
run "$tmp/probe.sh" --flag --set
expect "missing value of a repeatable" "2 probe.sh: --set needs a value (try --help)" "$rc $err"

run "$tmp/nopos.sh" --x 1 extra
expect "positional without an array" "2 nopos.sh: unexpected argument 'extra' (try --help)" "$rc $err"

run "$tmp/probe.sh" --help
expect "--help: exit 0" 0 "$rc"
expect "--help: the header" "The probe's header.

  --x  a value (default 1)" "$out"
run "$tmp/probe.sh" -h
expect "-h: the header" "0 The probe's header." "$rc ${out%%$'\n'*}"
run "$tmp/probe.sh" --x 1 --help --no-such-option
expect "--help after options" "0 The probe's header." "$rc ${out%%$'\n'*}"
run_in "$tmp" ./probe.sh --help
expect "--help by a relative path, after the script's cd" "0 The probe's header." "$rc ${out%%$'\n'*}"

sed "s/'x= /'x= 2x= /" "$tmp/probe.sh" > "$tmp/badspec.sh"
run "$tmp/badspec.sh"
expect "a bad spec word" "2 parse_options: bad spec word '2x='" "$rc $err"
sed "s/'x= /'x= --y= /" "$tmp/probe.sh" > "$tmp/badspec.sh"
run "$tmp/badspec.sh"
expect "a bad spec word" "2 parse_options: bad spec word '--y='" "$rc $err"

# Every script of scripts/bench and scripts/gpu, in the tree and in a GPU kit's layout.
mkdir -p "$tmp/kit/src/scripts"
cp -r "$root/scripts/bench" "$root/scripts/gpu" "$tmp/kit/src/scripts/"
n=0
for script in "$root"/scripts/bench/*.sh "$root"/scripts/gpu/*.sh; do
  rel=${script#"$root"/}
  [[ $(head -c 2 "$script") == '#!' ]] || continue  # sourced, not run (scripts/gpu/common.sh)
  n=$((n + 1))
  checks=$((checks + 1))
  grep -q '^parse_options ' "$script" || { failures=$((failures + 1)); echo "FAIL $rel does not use parse_options"; }
  header=$(sed -n '2p' "$script" | sed 's/^# \{0,1\}//')
  run "$script" --help
  expect "$rel --help" "0 $header" "$rc ${out%%$'\n'*}"
  help=$out
  [[ $(wc -l <<< "$help") -ge 3 ]] || expect "$rel --help has more than a line" "3+ lines" "$help"
  run "$script" --no-such-option
  expect "$rel --no-such-option" "2 ${script##*/}: unknown option --no-such-option (try --help)" "$rc $err"
  run_in "$tmp" "kit/src/$rel" --help
  expect "$rel --help in the kit's layout" "0 $help" "$rc $out"
  run_in "$(dirname "$tmp/kit/src/$rel")" "./${script##*/}" --no-such-option
  expect "$rel in the kit's layout, by a relative path" "2 ${script##*/}: unknown option --no-such-option (try --help)" "$rc $err"
done
[[ $n -ge 13 ]] || expect "scripts found" "13 or more" "$n"

finish test_options "$n scripts"
