# shellcheck shell=bash
# Shared by the scripts of scripts/gpu (sourced, not run); their option parser is
# scripts/bench/lib/options.sh.

# replace_dir DIR MARKER: empties DIR for a fresh run, refusing a folder this tooling did not make
# (one that holds files but not MARKER), so that a mistyped --out or --work never deletes data.
replace_dir() {
  local dir=$1 marker=$2
  if [[ -d $dir && -n $(ls -A "$dir") && ! -e $dir/$marker ]]; then
    echo "${0##*/}: refusing to replace $dir: it holds files and is not a folder of this tool (no $marker)" >&2
    exit 2
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  touch "$dir/$marker"
}
