# shellcheck shell=bash
# The option parser of the scripts in scripts/bench and scripts/gpu (sourced, not run). Source it
# before the script changes folder: it notes the script's path for --help.
#
#   parse_options SPEC "$@"
#
# SPEC is a list of words, one per option (an option's variable is its name with dashes turned
# into underscores unless the word names one):
#   name=          --name VALUE sets $name            (bucket-mb= sets $bucket_mb)
#   name=var       --name VALUE sets $var             (bucket-mb=bucket sets $bucket)
#   name!          --name sets $name to 1             (a flag)
#   name!var       --name sets $var to 1
#   name!var=V     --name sets $var to V              (no-epoch!epoch=0)
#   name+          --name VALUE appends the two words `--name VALUE` to the array $name; repeatable,
#   name+array     and the array passes them on to a shoplens command as they were given
#   @array         the positional arguments are appended to $array; without it a positional
#                  argument is an error
# Every script also gets -h/--help, which prints its header comment (from line 2 to the line
# before `set -euo pipefail`, without the leading '# ') and exits 0, and `--`, after which every
# argument is positional. An unknown option, a value option with no value or a positional argument
# the spec has no array for: "SCRIPT: PROBLEM (try --help)" on stderr, exit status 2.
# The defaults are what the variables hold before the call; the arrays are created when unset.

_options_script=$(cd "$(dirname "$0")" && pwd)/${0##*/}

# options_help: the script's header comment, which is its --help.
options_help() {
  sed -n '2,/^set -euo/p' "$_options_script" | sed '$d; s/^# \{0,1\}//'
}

# options_usage_error MESSAGE: "SCRIPT: MESSAGE (try --help)" on stderr, then exit 2.
options_usage_error() {
  echo "${_options_script##*/}: $1 (try --help)" >&2
  exit 2
}

# _options_spec WORD: fills _po_kind, _po_target and _po_value (parse_options' locals) from WORD.
_options_spec() {
  # The locals start with _ps_: eval below runs in this scope.
  local _ps_word=$1 _ps_name _ps_target _ps_kind _ps_value=""
  case $_ps_word in
    @*) _ps_name="" _ps_target=${_ps_word#@} _ps_kind=positional ;;
    *!*) _ps_name=${_ps_word%%!*} _ps_target=${_ps_word#*!} _ps_kind=flag _ps_value=1
         if [[ $_ps_target == *=* ]]; then _ps_value=${_ps_target#*=} _ps_target=${_ps_target%%=*}; fi ;;
    *+*) _ps_name=${_ps_word%%+*} _ps_target=${_ps_word#*+} _ps_kind=append ;;
    *=*) _ps_name=${_ps_word%%=*} _ps_target=${_ps_word#*=} _ps_kind=value ;;
    *) _ps_name="" _ps_target="" _ps_kind="" ;;
  esac
  _ps_target=${_ps_target:-${_ps_name//-/_}}
  if [[ -z $_ps_kind || ! $_ps_target =~ ^[A-Za-z_][A-Za-z0-9_]*$ ||
        ( $_ps_kind != positional && ! $_ps_name =~ ^[A-Za-z0-9][A-Za-z0-9-]*$ ) ]]; then
    echo "parse_options: bad spec word '$_ps_word'" >&2
    exit 2
  fi
  if [[ $_ps_kind == positional ]]; then
    _po_positional=$_ps_target
  else
    _po_kind[$_ps_name]=$_ps_kind _po_target[$_ps_name]=$_ps_target _po_value[$_ps_name]=$_ps_value
  fi
  if [[ $_ps_kind == positional || $_ps_kind == append ]]; then
    eval "$_ps_target+=()"  # declared (and empty) when unset, so that "${array[@]}" works under set -u
  fi
}

parse_options() {
  # The locals start with _po_: a script's option variable must not be one of them.
  local _po_word _po_name _po_positional="" _po_words
  local -A _po_kind=() _po_target=() _po_value=()
  read -r -d '' -a _po_words <<< "$1" || true  # the spec may span lines
  shift
  for _po_word in "${_po_words[@]}"; do
    _options_spec "$_po_word"
  done
  while [[ $# -gt 0 ]]; do
    case $1 in
      -h|--help) options_help; exit 0 ;;
      --) shift; break ;;
      --?*) _po_name=${1#--} ;;
      -?*) options_usage_error "unknown option $1" ;;
      *) [[ -n $_po_positional ]] || options_usage_error "unexpected argument '$1'"
         eval "$_po_positional+=(\"\$1\")"
         shift
         continue ;;
    esac
    case ${_po_kind[$_po_name]:-} in
      value) [[ $# -ge 2 ]] || options_usage_error "$1 needs a value"
             printf -v "${_po_target[$_po_name]}" '%s' "$2"
             shift 2 ;;
      flag) printf -v "${_po_target[$_po_name]}" '%s' "${_po_value[$_po_name]}"
            shift ;;
      append) [[ $# -ge 2 ]] || options_usage_error "$1 needs a value"
              eval "${_po_target[$_po_name]}+=(\"\$1\" \"\$2\")"
              shift 2 ;;
      *) options_usage_error "unknown option $1" ;;
    esac
  done
  if [[ $# -gt 0 ]]; then
    [[ -n $_po_positional ]] || options_usage_error "unexpected argument '$1'"
    eval "$_po_positional+=(\"\$@\")"
  fi
}
