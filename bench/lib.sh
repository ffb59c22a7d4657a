# Sourced by the bench scripts, right after their `set -euo pipefail`:
#   source "$(dirname "$0")/lib.sh"
# It gives them what each needs the same way. A script documents its options
# in a "# usage:" comment block ending at `set `.
#
#   here, bench            this folder; the script's name, for messages
#   parse_options NAME=DEFAULT... -- ARGS...
#                          sets each NAME to DEFAULT, then reads the command
#                          line: `--NAME VALUE` (dashes for underscores) sets
#                          one of those NAMEs, -h/--help prints the usage,
#                          anything else is refused; sets command_line
#   usage                  prints the usage block
#   die MESSAGE            prints "BENCH: MESSAGE" and exits 2
#   fail MESSAGE FILE...   prints "BENCH: MESSAGE:" and the FILEs (a step's
#                          output) and exits 1
#   need_tools NAME...     each variable NAME must hold an executable's path,
#                          which is made absolute; else dies saying to build
#                          it or pass --NAME
#   absolute PATH          PATH made absolute (its folder must exist)
#   rooted PATH            PATH made absolute against the current folder
#   make_work PREFIX       a fresh folder $tmp/PREFIX.XXXXXX in `work`; on
#                          exit, INT or TERM the servers still running are
#                          stopped and the folder removed
#   append_csv FROM TO     FROM's rows appended to TO (its header too when TO
#                          is new); returns 1, saying so, when TO has other
#                          columns
#   median                 the median of the numbers on standard input
#   column_of NAME CSV     the column number of NAME in CSV's header line
#   restart_cluster PAGEFILED DIR ARGS...
#                          the servers of start_cluster restarted on their
#                          addresses with ARGS
# and, from tests/sqlite/pagefiled_cluster.sh, start_pagefiled,
# start_cluster and stop_cluster: servers on loopback or a Unix socket, each
# start bounded to 10 s, stopped by process id.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench=$(basename "$0")
# shellcheck source=tests/sqlite/pagefiled_cluster.sh
source "$here/../tests/sqlite/pagefiled_cluster.sh"

usage() { sed -n '/^# usage:/,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "$bench: $*" >&2; exit 2; }
fail() { echo "$bench: $1:" >&2; shift; cat "$@" >&2; exit 1; }
bad_argument() { echo "$bench: unknown argument '$1'" >&2; usage >&2; exit 2; }
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
rooted() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
column_of() { head -1 "$2" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1; }
# turns RUN A B: "A B" in even runs, "B A" in odd ones. Side by side, each
# goes first in half the runs: the second of a pair meets a machine the
# first has just left busy (its writeback, its freed files), which cost
# one side 5 to 8% when it always went first.
turns() { if (($1 % 2)); then echo "$3 $2"; else echo "$2 $3"; fi; }

# (Locals start with an underscore: an option of the same name would set the
# local instead.)
parse_options() {
  local _known="" _name
  while [[ $# -gt 0 && $1 != -- ]]; do
    _name=${1%%=*}
    printf -v "$_name" '%s' "${1#*=}"
    _known+=" $_name"
    shift
  done
  shift
  command_line="$0 $*"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --?*)
        _name=${1#--}
        _name=${_name//-/_}
        [[ "$_known " == *" $_name "* ]] || bad_argument "$1"
        [[ $# -ge 2 ]] || die "$1 needs a value"
        printf -v "$_name" '%s' "$2"
        shift 2 ;;
      *) bad_argument "$1" ;;
    esac
  done
}

need_tools() {
  local _name _path
  for _name in "$@"; do
    _path=${!_name}
    [[ -x "$_path" ]] || die "no $(basename "$_path") at $_path; build it (ninja -C build) or pass --${_name//_/-}"
    printf -v "$_name" '%s' "$(absolute "$_path")"
  done
}

# INT and TERM, too, leave through the EXIT trap (status 130, 143): the
# servers run in the background, started ignoring ^C, and are stopped only
# there.
make_work() {
  work=$(mktemp -d "$tmp/$1.XXXXXX")
  trap 'stop_cluster; rm -rf "$work"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

append_csv() {
  local header
  header=$(head -1 "$1")
  if [[ ! -s "$2" ]]; then
    echo "$header" > "$2"
  elif [[ "$(head -1 "$2")" != "$header" ]]; then
    echo "$bench: $2 has other columns; rows kept only in this run's output" >&2
    return 1
  fi
  tail -n +2 "$1" >> "$2"
}

# restart_cluster PAGEFILED DIR ARGS...: stops the servers and starts them
# again over DIR/server-I (as start_cluster left them) on the addresses of
# `bus`, so that the catalog's records still name them, with ARGS; their
# caches start empty.
restart_cluster() {
  local pagefiled=$1 dir=$2 i=0 listen addresses
  shift 2
  stop_cluster
  IFS=, read -r -a addresses <<< "$bus"
  for listen in "${addresses[@]}"; do
    start_pagefiled "$pagefiled" "$dir/server-$i" "$listen" "$@" || exit 1
    i=$((i + 1))
  done
}
