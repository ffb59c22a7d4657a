#!/usr/bin/env bash
# SQLite through the pagefile VFS against SQLite's unix VFS, side by side in
# one run:
#   workloads  bench/sqlite_vfs_workload.py (bulk insert, random point reads,
#              a full scan, transactions of ~1000 random pages) on
#              unix            a local file
#              default         pagefile with no bus configured: a local
#                              Pagefile at the path
#              embedded        pagefile on the in-process cluster
#                              (PAGEFILE_BUS=inproc:4)
#              remote-cN       pagefile on SERVERS pagefiled on loopback, each
#                              EMULATING a disk of LATENCY ms, at concurrency N
#   speedtest1 SQLite's speedtest1 --size SIZE, unix against pagefile on the
#              in-process cluster (the same binary; pagefile made the default VFS
#              by the test harness's init hook)
#   capture    what trace capture costs: speedtest1 --size SIZE on pagefile's
#              default (no bus: local Pagefiles), without and with
#              PAGEFILE_TRACE, --local-runs times each, alternating; then the
#              captured trace's size and `pf-replay stats` of it
#
# usage: bench/sqlite_vfs.sh [--build DIR] [--parts "workloads speedtest1 capture"]
#          [--levels "1 4 12"] [--servers 6] [--latency-ms 10] [--cache-pages 64]
#          [--rows 2000] [--reads 5000] [--txns 2] [--txn-rows 1000]
#          [--size 100] [--local-runs 5] [--csv OUT] [--tmp DIR]
# unix, default and embedded run --local-runs times each, alternating on fresh
# databases (they take milliseconds; one run is mostly noise): the tables
# show medians, the CSV every run.
# It uses the built pagefile.so and pagefiled of --build (default build) and
# builds speedtest1 with the TCL test harness (tests/sqlite/build-harness,
# cached under BUILD/sqlite-harness). Every database passes integrity_check.
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options build="$here/../build" parts="workloads speedtest1 capture" levels="1 4 12" servers=6 \
  latency_ms=10 cache_pages=64 rows=2000 reads=5000 txns=2 txn_rows=1000 size=100 local_runs=5 \
  csv="" tmp="${TMPDIR:-/tmp}" -- "$@"

build=$(cd "$build" && pwd) || die "no build directory"
extension="$build/vfs/pagefile.so"
pagefiled="$build/tools/pagefiled"
python=/usr/bin/python3
[ -f "$extension" ] || die "no $extension; build it (ninja -C $build)"
[ -x "$pagefiled" ] || die "no $pagefiled; build it (ninja -C $build)"
"$python" -c 'import sqlite3; sqlite3.connect(":memory:").enable_load_extension(True)' 2>/dev/null ||
  die "$python cannot load SQLite extensions (Debian's python3 can)"

make_work sqlite-vfs-bench

declare -A seconds  # seconds[config/workload]
configs=()

# workload CONFIG DB [ENV...]: runs the workloads on DB, records times
# (appended to seconds[CONFIG/WORKLOAD], space-separated, one per run).
workload() {
  local config=$1 db=$2 name secs ops
  shift 2
  echo "-- $config: $db" >&2
  env "$@" "$python" "$here/sqlite_vfs_workload.py" --db "$db" --extension "$extension" \
      --rows "$rows" --reads "$reads" --txns "$txns" --txn-rows "$txn_rows" > "$work/$config.out" ||
    die "$config failed: $(cat "$work/$config.out")"
  while read -r name secs ops; do
    seconds[$config/$name]="${seconds[$config/$name]:-}${seconds[$config/$name]:+ }$secs"
    [ -z "$csv" ] || echo "$config,$name,$secs,$ops" >> "$csv"
  done < "$work/$config.out"
  [[ " ${configs[*]} " == *" $config "* ]] || configs+=("$config")
}
# median_of CONFIG WORKLOAD: the median of its runs.
median_of() { tr ' ' '\n' <<< "${seconds[$1/$2]}" | median; }

# SQLite's speedtest1, built by build_speedtest1 with the TCL test harness.
speedtest1="$build/sqlite-harness/bld/speedtest1"
build_speedtest1() { "$here/../tests/sqlite/build-harness" "$build/sqlite-harness" >&2; }
# run_speedtest1 LABEL OUT DB [ENV...]: speedtest1 --size SIZE on DB in the
# work directory, under `env ENV...`, its output in OUT; dies if it fails.
run_speedtest1() {
  local label=$1 out=$2 db=$3
  shift 3
  (cd "$work" && env "$@" "$speedtest1" --size "$size" "$db" > "$out" 2>&1) ||
    die "speedtest1 $label failed: $(tail "$out")"
}
# total OUT: the TOTAL seconds of speedtest1's output OUT.
total() { sed -n 's/^ *TOTAL\.* *\([0-9.]*\)s.*/\1/p' "$1"; }

echo "machine: $(nproc) cores, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "tmp: $work ($(stat -f -c %T "$work"))"
[ -z "$csv" ] || echo "config,workload,seconds,operations" > "$csv"

if [[ " $parts " == *" workloads "* ]]; then
  echo "== workloads: $rows rows of ~3000 B (4 KiB pages), $reads point reads, full scan, $txns transactions of $txn_rows random rows =="
  # Local runs take milliseconds on a shared machine: --local-runs pairs,
  # unix and embedded alternating, each on a fresh database; medians shown.
  for ((run = 0; run < local_runs; run++)); do
    rm -rf "$work/unix.db" "$work/default.db" "$work/home"
    workload unix "$work/unix.db"
    workload default "file:$work/default.db?vfs=pagefile" -u PAGEFILE_BUS
    workload embedded "file:$work/embedded.db?vfs=pagefile" PAGEFILE_BUS=inproc:4 PAGEFILE_HOME="$work/home"
  done
  start_cluster "$pagefiled" "$work" "$servers" --disk-latency "$latency_ms" --cache-pages "$cache_pages" ||
    die "cannot start $servers pagefiled"
  echo "servers: $servers x pagefiled --disk-latency $latency_ms --cache-pages $cache_pages (EMULATED disk latency)"
  for level in $levels; do
    workload "remote-c$level" "file:/bench-c$level.db?vfs=pagefile&concurrency=$level" PAGEFILE_BUS="$bus"
  done
  stop_cluster

  printf '\n%-12s' "seconds"
  for w in insert reads scan txn txn-cold; do printf '%12s' "$w"; done
  echo
  for config in "${configs[@]}"; do
    printf '%-12s' "$config"
    for w in insert reads scan txn txn-cold; do printf '%12.4f' "$(median_of "$config" "$w")"; done
    echo
  done
  ratio_row() {  # ratio_row LABEL NUMERATOR_CONFIG DENOMINATOR_CONFIG
    printf '%-24s' "$1"
    for w in insert reads scan txn txn-cold; do
      awk -v a="$(median_of "$2" "$w")" -v b="$(median_of "$3" "$w")" 'BEGIN { printf "%9.2fx", (b > 0 ? a / b : 0) }'
    done
    echo
  }
  echo
  printf '%-24s' "ratio"; for w in insert reads scan txn txn-cold; do printf '%10s' "$w"; done; echo
  ratio_row "default / unix" default unix
  ratio_row "embedded / unix" embedded unix
  first=${levels%% *}
  for level in $levels; do
    [ "$level" = "$first" ] && continue
    ratio_row "remote c$first / c$level" "remote-c$first" "remote-c$level"
  done
fi

if [[ " $parts " == *" speedtest1 "* ]]; then
  build_speedtest1
  echo
  echo "== speedtest1 --size $size: unix against pagefile on the in-process cluster (inproc:4) =="
  run_speedtest1 "on unix" "$work/st-unix.out" "$work/st-unix.db" -u PAGEFILE_TEST_EXTENSION -u PAGEFILE_VFS_DEFAULT
  run_speedtest1 "on pagefile" "$work/st-pagefile.out" "$work/st-pagefile.db" \
    PAGEFILE_BUS=inproc:4 PAGEFILE_TEST_EXTENSION="$extension" PAGEFILE_VFS_DEFAULT=1 PAGEFILE_HOME="$work/st-home"
  unix_total=$(total "$work/st-unix.out")
  pagefile_total=$(total "$work/st-pagefile.out")
  # Side by side, test by test: "NNN - name .... 0.123s".
  paste -d'|' <(grep -E '^ *[0-9]+ - ' "$work/st-unix.out") <(grep -E '^ *[0-9]+ - ' "$work/st-pagefile.out") |
    awk -F'|' '{ u = $1; p = $2; su = u; sub(/.* /, "", su); sp = p; sub(/.* /, "", sp);
                 name = u; sub(/\.\.\..*/, "", name); sub(/ +[0-9.]+s$/, "", name);
                 a = su + 0; b = sp + 0
                 printf "%-60s %9s %9s %8.2fx\n", substr(name, 1, 60), su, sp, (a > 0 ? b / a : 0) }' |
    sed '1i\test                                                              unix  pagefile    ratio'
  awk -v u="$unix_total" -v p="$pagefile_total" \
    'BEGIN { printf "TOTAL: unix %.3f s, pagefile (embedded) %.3f s, ratio %.2fx\n", u, p, (u > 0 ? p / u : 0) }'
  [ -z "$csv" ] || { echo "speedtest1-unix,total,$unix_total,$size" >> "$csv";
                     echo "speedtest1-embedded,total,$pagefile_total,$size" >> "$csv"; }
fi

if [[ " $parts " == *" capture "* ]]; then
  build_speedtest1
  echo
  echo "== trace capture: speedtest1 --size $size on the default (local Pagefiles), without and with PAGEFILE_TRACE =="
  : > "$work/capture-off.txt"
  : > "$work/capture-on.txt"
  for ((run = 1; run <= local_runs; ++run)); do
    for mode in off on; do
      rm -f "$work"/cap.db* "$work"/cap.trace*
      trace_env=(-u PAGEFILE_TRACE)
      [ "$mode" = on ] && trace_env=(PAGEFILE_TRACE="$work/cap.trace")
      run_speedtest1 "(capture $mode)" "$work/cap-$mode.out" "$work/cap.db" \
        -u PAGEFILE_BUS "${trace_env[@]}" PAGEFILE_TEST_EXTENSION="$extension" PAGEFILE_VFS_DEFAULT=1
      total "$work/cap-$mode.out" >> "$work/capture-$mode.txt"
      [ -z "$csv" ] || echo "speedtest1-capture-$mode,total,$(total "$work/cap-$mode.out"),$size" >> "$csv"
    done
  done
  off=$(median < "$work/capture-off.txt")
  on=$(median < "$work/capture-on.txt")
  echo "runs without capture (s): $(tr '\n' ' ' < "$work/capture-off.txt")"
  echo "runs with capture (s):    $(tr '\n' ' ' < "$work/capture-on.txt")"
  awk -v a="$off" -v b="$on" 'BEGIN { printf "median: without %.3f s, with %.3f s, ratio %.3fx\n", a, b, (a > 0 ? b / a : 0) }'
  echo "the last trace: $(grep -c . "$work/cap.trace") lines, $(du -k "$work/cap.trace" | cut -f1) KiB, data $(du -k "$work/cap.trace.data" | cut -f1) KiB"
  "$build/tools/pf-replay" stats "$work/cap.trace" | head -8
fi
