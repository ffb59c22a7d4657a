#!/usr/bin/env bash
# What page checksums cost, measured side by side in one run (doc/page_format.md):
#   cached     cached random 8 KiB page reads through pf-replay at each
#              concurrency level from ONE pagefiled (every page in its cache,
#              on a Unix socket, as bench/remote_concurrency.sh's nbd part),
#              against a second pagefiled run with --no-checksums read with
#              `pf-replay --checksums off`; on and off alternate, --repeat
#              times each, on fresh seeds.
#   workloads  bench/sqlite_vfs_workload.py on the in-process cluster, with
#              checksums and with `checksums=off` (its embedded servers too:
#              bus=inproc:4,checksums=off), alternating --local-runs times.
#   local      the same on the default with no bus (local Pagefiles at their
#              paths), `checksums=on` against `checksums=off`.
# Prints medians and the ratio off/on (1.05 means checksums cost 5%).
#
# usage: bench/checksums.sh [--build DIR] [--parts "cached workloads local"]
#          [--levels "1 4 12 32"] [--file-pages 4000] [--page-size 8192]
#          [--seconds 2] [--repeat 5] [--local-runs 7] [--tmp DIR]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options build="$here/../build" parts="cached workloads local" levels="1 4 12 32" file_pages=4000 \
  page_size=8192 seconds=2 repeat=5 local_runs=7 tmp="${TMPDIR:-/tmp}" -- "$@"

build=$(cd "$build" && pwd) || die "no build directory"
pf_replay="$build/tools/pf-replay"
pagefiled="$build/tools/pagefiled"
need_tools pf_replay pagefiled
python=/usr/bin/python3
make_work pf-bench-checksums
cd "$work"

echo "command: $command_line"
echo "machine: $(uname -srm), $(nproc) CPUs; date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# ratio OFF ON: OFF / ON, two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

if [[ " $parts " == *" cached "* ]]; then
  gen() { "$pf_replay" generate --file data --file-pages "$file_pages" --page-size "$page_size" "$@"; }
  gen --pattern sequential --ops "$file_pages" --write-ratio 1 > fill.trace
  # One server each way, every page in its cache.
  declare -A bus
  for mode in on off; do
    extra=()
    [ "$mode" = off ] && extra=(--no-checksums)
    mkdir -p "$work/$mode"
    start_pagefiled "$pagefiled" "$work/$mode/server" "unix:$work/$mode.sock" \
      --cache-pages $((file_pages * 2)) "${extra[@]}" || exit 1
    bus[$mode]=$address
    "$pf_replay" run fill.trace --bus "${bus[$mode]}" --checksums "$mode" --no-progress > /dev/null ||
      die "filling the file with checksums $mode failed"
  done
  echo "== cached random reads of $page_size B pages, one pagefiled (--cache-pages $((file_pages * 2))) =="
  printf '%-12s %14s %14s %10s\n' concurrency "on pages/s" "off pages/s" "off/on"
  for level in $levels; do
    declare -a on_rates=() off_rates=()
    ops=$(awk -v l="$level" -v s="$seconds" 'BEGIN { n = int(6000 * s * (l < 4 ? l : 4)); print (n < 2000 ? 2000 : n) }')
    for ((run = 0; run < repeat; run++)); do
      gen --pattern random --ops "$ops" --write-ratio 0 --seed $((level * 1000 + run)) > read.trace
      for mode in $(turns "$run" on off); do
        rm -f runs.csv
        "$pf_replay" run read.trace --bus "${bus[$mode]}" --checksums "$mode" --concurrency "$level" \
          --csv runs.csv --no-progress > run.out 2> run.err || fail "pf-replay ($mode, c$level) failed" run.out run.err
        rate=$(tail -1 runs.csv | cut -d, -f"$(column_of pages_per_s runs.csv)")
        if [ "$mode" = on ]; then on_rates+=("$rate"); else off_rates+=("$rate"); fi
      done
    done
    on=$(printf '%s\n' "${on_rates[@]}" | median)
    off=$(printf '%s\n' "${off_rates[@]}" | median)
    printf '%-12s %14.0f %14.0f %10s\n' "$level" "$on" "$off" "$(ratio "$off" "$on")"
  done
  stop_cluster
fi

# workloads TITLE URI_SUFFIX_ON URI_SUFFIX_OFF: sqlite_vfs_workload.py with
# checksums on and off, alternating --local-runs times; prints medians.
workloads() {
  local title=$1 on_suffix=$2 off_suffix=$3 mode uri run w on off
  local extension="$build/vfs/pagefile.so"
  [ -f "$extension" ] || die "no $extension; build it"
  declare -A secs=()
  for ((run = 0; run < local_runs; run++)); do
    for mode in $(turns "$run" on off); do
      rm -rf "$work/home-$mode" "$work"/w-*.db*
      uri="file:$work/w-$mode-$run.db?vfs=pagefile&checksums=$mode"
      if [ "$mode" = on ]; then uri="$uri$on_suffix"; else uri="$uri$off_suffix"; fi
      env -u PAGEFILE_BUS PAGEFILE_HOME="$work/home-$mode" "$python" "$here/sqlite_vfs_workload.py" \
        --db "$uri" --extension "$extension" > "w-$mode.out" || fail "workloads ($mode) failed" "w-$mode.out"
      while read -r name s _; do secs[$mode/$name]="${secs[$mode/$name]:-} $s"; done < "w-$mode.out"
    done
  done
  echo "== SQLite workloads $title, medians of $local_runs runs =="
  printf '%-10s %12s %12s %10s\n' workload "on s" "off s" "on/off"
  for w in insert reads scan txn txn-cold; do
    on=$(tr ' ' '\n' <<< "${secs[on/$w]}" | grep . | median)
    off=$(tr ' ' '\n' <<< "${secs[off/$w]}" | grep . | median)
    printf '%-10s %12.4f %12.4f %10s\n' "$w" "$on" "$off" "$(ratio "$on" "$off")"
  done
}

if [[ " $parts " == *" workloads "* ]]; then
  workloads "on the embedded servers (bus=inproc:4)" "&bus=inproc:4" "&bus=inproc:4,checksums=off"
fi
if [[ " $parts " == *" local "* ]]; then
  workloads "on the default with no bus (local Pagefiles)" "" ""
fi
