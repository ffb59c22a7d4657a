# Sourced by the bench scripts: what each of them needs the same way.
# The caller sets `bench` (its name, for messages) before sourcing, and
# documents its options in a "# usage:" comment block ending at `set `.
#
#   usage                  prints that block
#   die MESSAGE            prints "BENCH: MESSAGE" and exits 2
#   bad_argument ARG       an unknown argument: says so, prints usage, exits 2
#   absolute PATH          PATH made absolute
#   need_tool PATH HOW     dies unless PATH is executable, saying HOW to get it
#   median                 the median of the numbers on standard input
#   column_of NAME CSV     the column number of NAME in CSV's header line
#   parse_options ARGS...  the command line, into the variables of `options`
# and, from tests/sqlite/pagefiled_cluster.sh, start_pagefiled,
# start_cluster and stop_cluster: servers on loopback, stopped by process id.
bench_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/sqlite/pagefiled_cluster.sh
source "$bench_lib_dir/../tests/sqlite/pagefiled_cluster.sh"

usage() { sed -n '/^# usage:/,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "$bench: $*" >&2; exit 2; }
bad_argument() { echo "$bench: unknown argument '$1'" >&2; usage >&2; exit 2; }
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
need_tool() { [[ -x "$1" ]] || die "no $(basename "$1") at $1; $2"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
column_of() { head -1 "$2" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }

# parse_options ARGS...: each `--NAME VALUE` sets the variable NAME (dashes
# as underscores), which must be one of the words of the script's `options`;
# -h and --help print the usage. Anything else is refused.
parse_options() {
  local name
  while [[ $# -gt 0 ]]; do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --?*)
        name=${1#--}
        name=${name//-/_}
        [[ " $options " == *" $name "* ]] || bad_argument "$1"
        [[ $# -ge 2 ]] || die "$1 needs a value"
        printf -v "$name" '%s' "$2"
        shift 2 ;;
      *) bad_argument "$1" ;;
    esac
  done
}
