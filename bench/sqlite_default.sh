#!/usr/bin/env bash
# The pagefile VFS as the drop-in default (no bus configured: each database a
# local Pagefile at its path) against SQLite's unix VFS, side by side in one
# run, in rollback-journal (delete) and WAL mode:
#   1 process    bench/sqlite_vfs_workload.py (bulk insert, random point
#                reads, a full scan, transactions of ~1000 random rows, the
#                same with a cold cache)
#   N processes  bench/sqlite_processes.py: N processes each committing TXNS
#                small transactions on one counter and log, with point reads
#                between, waiting on each other's locks
# Each configuration runs --runs times, unix and default alternating on fresh
# databases, each first in half the runs (turns); the table shows medians and
# the ratio default/unix (the goal of issue 19: at most 1.1), and the median
# of the runs' own ratios (paired: a run of each, one after the other).
#
# --trim-threshold BYTES runs both with glibc's malloc trim threshold fixed
# (GLIBC_TUNABLES=glibc.malloc.trim_threshold): each workload opens fresh
# connections, and whether glibc gives the heap back to the kernel at each
# close (and faults it in again after) depends on where the last blocks of
# the process lie, a lottery that moved a scan by a third either way.
#
# --synchronous MODE runs every connection of both with PRAGMA synchronous=MODE
# (default: SQLite's, FULL).
#
# --one-txns N is the 1-process workload's transactions of ~1000 rows (txn and
# txn-cold; default 2, some 40 ms each here) and --scans N its scans (default
# 5): larger, each figure is timed over more work and moves less from run to
# run on a shared machine.
#
# --paired-rounds N (default 40; 0: none) then runs bench/sqlite_paired.py in
# each mode: the 1-process workloads once each per round, unix and the
# default taking turns in one process, so that two figures of a pair lie
# milliseconds apart rather than seconds. Its table gives the paired ratio
# with a 95% interval: on this shared machine, the runs above leave each
# ratio uncertain by about a tenth, 100 paired rounds by two to five
# hundredths. (Its rows go to OUT-paired.csv with --csv OUT.)
#
# usage: bench/sqlite_default.sh [--build DIR] [--runs 5] [--rows 2000] [--reads 5000]
#          [--procs 4] [--txns 200] [--one-txns 2] [--scans 5] [--modes "delete wal"]
#          [--csv OUT] [--tmp DIR] [--trim-threshold BYTES] [--synchronous MODE]
#          [--paired-rounds 40]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options build="$here/../build" runs=5 rows=2000 reads=5000 procs=4 txns=200 one_txns=2 scans=5 \
  modes="delete wal" csv="" tmp="${TMPDIR:-/tmp}" trim_threshold="" synchronous="" paired_rounds=40 -- "$@"
[ -z "$trim_threshold" ] || export GLIBC_TUNABLES="glibc.malloc.trim_threshold=$trim_threshold"

build=$(cd "$build" && pwd) || die "no build directory"
extension="$build/vfs/pagefile.so"
python=/usr/bin/python3
[ -f "$extension" ] || die "no $extension; build it (ninja -C $build)"
"$python" -c 'import sqlite3; sqlite3.connect(":memory:").enable_load_extension(True)' 2>/dev/null ||
  die "$python cannot load SQLite extensions (Debian's python3 can)"

make_work sqlite-default-bench
declare -A seconds  # seconds[mode/config/workload]: one per run, space-separated
[ -z "$csv" ] || echo "mode,config,workload,seconds,operations" > "$csv"

# record MODE CONFIG OUTPUT: "workload seconds operations" lines into seconds[].
record() {
  local name secs ops
  while read -r name secs ops; do
    seconds[$1/$2/$name]="${seconds[$1/$2/$name]:-}${seconds[$1/$2/$name]:+ }$secs"
    [ -z "$csv" ] || echo "$1,$2,$name,$secs,$ops" >> "$csv"
  done < "$3"
}

# uri CONFIG NAME: the database NAME for CONFIG (unix, or pagefile with no bus).
uri() { if [ "$1" = unix ]; then echo "$work/$2"; else echo "file:$work/$2?vfs=pagefile"; fi; }

echo "machine: $(nproc) cores, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "tmp: $work ($(stat -f -c %T "$work"))"
echo "malloc trim threshold: ${trim_threshold:-glibc default}"
echo "synchronous: ${synchronous:-FULL, the SQLite default}"
echo "== $rows rows of ~3000 B; $reads point reads; $scans scans; $one_txns transactions of ~1000 rows; $procs processes x $txns transactions; $runs runs each =="
for mode in $modes; do
  for ((run = 0; run < runs; run++)); do
    for config in $(turns "$run" unix default); do
      rm -rf "$work"/*.db "$work"/*.db-*
      env -u PAGEFILE_BUS "$python" "$here/sqlite_vfs_workload.py" --db "$(uri $config one.db)" \
        --extension "$extension" --journal-mode "$mode" --synchronous "$synchronous" --rows "$rows" \
        --reads "$reads" --txns "$one_txns" --scans "$scans" > "$work/out" ||
        fail "$mode $config workloads failed" "$work/out"
      record "$mode" "$config" "$work/out"
      env -u PAGEFILE_BUS "$python" "$here/sqlite_processes.py" --db "$(uri $config many.db)" \
        --extension "$extension" --journal-mode "$mode" --synchronous "$synchronous" --procs "$procs" \
        --txns "$txns" > "$work/out" ||
        fail "$mode $config processes failed" "$work/out"
      record "$mode" "$config" "$work/out"
    done
  done
done

workloads="insert reads scan txn txn-cold processes-$procs"
median_of() { tr ' ' '\n' <<< "${seconds[$1]}" | median; }
printf '\n%-8s %-8s' mode config
for w in $workloads; do printf '%13s' "$w"; done
echo
for mode in $modes; do
  for config in unix default; do
    printf '%-8s %-8s' "$mode" "$config"
    for w in $workloads; do printf '%13.4f' "$(median_of "$mode/$config/$w")"; done
    echo
  done
  printf '%-8s %-8s' "$mode" "ratio"
  for w in $workloads; do
    awk -v a="$(median_of "$mode/default/$w")" -v b="$(median_of "$mode/unix/$w")" \
      'BEGIN { printf "%12.2fx", (b > 0 ? a / b : 0) }'
  done
  echo
  printf '%-8s %-8s' "$mode" "paired"
  for w in $workloads; do
    paste -d' ' <(tr ' ' '\n' <<< "${seconds[$mode/default/$w]}") <(tr ' ' '\n' <<< "${seconds[$mode/unix/$w]}") |
      awk '$2 > 0 { print $1 / $2 }' | median | awk '{ printf "%12.2fx", $1 }'
  done
  echo
done
echo
echo "seconds: medians of $runs runs; ratio: default / unix (lower is better; 1.00 is as fast as unix);"
echo "paired: the median of each run's default / unix (the two run side by side, so a slow spell of the"
echo "machine moves both)"

if ((paired_rounds > 0)); then
  paired_csv=""
  [ -z "$csv" ] || { paired_csv="${csv%.csv}-paired.csv"; echo "mode,round,config,workload,seconds" > "$paired_csv"; }
  for mode in $modes; do
    echo
    rm -rf "$work"/*.db "$work"/*.db-*
    env -u PAGEFILE_BUS "$python" "$here/sqlite_paired.py" --extension "$extension" --dir "$work" --rounds "$paired_rounds" \
      --rows "$rows" --reads "$reads" --journal-mode "$mode" --synchronous "$synchronous" \
      ${paired_csv:+--csv "$paired_csv"} > "$work/out" || fail "$mode paired rounds failed" "$work/out"
    cat "$work/out"
  done
fi
