#!/usr/bin/env bash
# The catalog on etcd against the built-in one (issue 16), side by side in
# one run: a 3-member etcd on loopback, 3 pagefiled with the built-in
# catalog and 3 with --catalog etcd://..., and SQLite commit streams
# (bench/commit_stream.py: one 600-byte row per transaction, rollback
# journal, replicas=R) through the VFS on each:
#
#   built-in  the bus names the servers; the first keeps the catalog
#   etcd      the bus names the servers and catalog=etcd://... per member:
#             the client keeps its records and locks in etcd itself
#   etcd, leader killed
#             the same, with the etcd leader SIGKILLed halfway: the
#             slowest commit from then on is the pause a client sees
#
# Each stream runs --seconds; --rounds streams of each, alternating, and
# the median of each figure is reported. A benchmark, not a test: the
# streams check their rows, nothing about speed.
#
# usage: bench/etcd_catalog.sh [--pagefiled PATH] [--extension PATH] [--seconds 5] [--rounds 3]
#            [--replicas 2] [--csv OUT] [--tmp DIR]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options pagefiled="$here/../build/tools/pagefiled" extension="$here/../build/vfs/pagefile.so" \
  seconds=5 rounds=3 replicas=2 csv="$PWD/etcd_catalog.csv" tmp="${TMPDIR:-/tmp}" -- "$@"
need_tools pagefiled
[[ -f "$extension" ]] || die "no $extension; build it (ninja -C build) or pass --extension"
csv=$(rooted "$csv")
make_work pf-bench-etcd
cd "$work"

echo "command: $command_line"
echo "machine: $(uname -srm), $(nproc) CPUs; data in $work ($(stat -f -c %T "$work") file system)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "etcd $(etcd --version | head -1 | cut -d' ' -f3), 3 members, 50 ms heartbeats, 500 ms election timeout"
echo

start_etcd "$work/etcd" 3 || exit 1
start_cluster "$pagefiled" "$work/builtin" 3 || exit 1
builtin_bus=$bus
start_cluster "$pagefiled" "$work/on-etcd" 3 --catalog "etcd://$etcd_members" || exit 1
etcd_bus_all="$bus,$etcd_bus"

stream() {  # NAME BUS ARGS...: one stream; prints its summary line
  local name=$1 bus=$2
  shift 2
  /usr/bin/python3 "$here/commit_stream.py" --extension "$extension" --seconds "$seconds" \
    --db "file:/$name.db?vfs=pagefile&replicas=$replicas&bus=$bus" "$@" 2> stream.err ||
    fail "the commit stream on $name failed" stream.err
}
value() { echo "$1" | tr ' ' '\n' | grep -A1 -x "$2" | tail -1; }

echo "catalog,round,commits,failed,seconds,commits_per_s,p50_ms,p99_ms,max_ms,max_after_kill_ms" > etcd_catalog.csv
for ((round = 1; round <= rounds; round++)); do
  for kind in builtin etcd etcd-leader-killed; do
    case $kind in
      builtin) line=$(stream "builtin-$round" "$builtin_bus") ;;
      etcd) line=$(stream "etcd-$round" "$etcd_bus_all") ;;
      etcd-leader-killed)
        leader=$(etcd_leader)
        [[ -n "$leader" ]] || die "etcd has no leader"
        line=$(stream "killed-$round" "$etcd_bus_all" --kill-pid "${etcd_pids[leader]}" \
          --kill-at "$(awk -v s="$seconds" 'BEGIN { print s / 2 }')")
        # The member comes back on its data and ports before the next round.
        restart_etcd_member "$leader" || exit 1
        ;;
    esac
    echo "$kind,$round,$(value "$line" commits),$(value "$line" failed),$(value "$line" seconds),$(value "$line" commits_per_s),$(value "$line" p50_ms),$(value "$line" p99_ms),$(value "$line" max_ms),$(value "$line" max_after_kill_ms || true)" >> etcd_catalog.csv
  done
done

col() { column_of "$1" etcd_catalog.csv; }
med() { awk -F, -v k="$1" -v c="$2" '$1 == k { print $c }' etcd_catalog.csv | median; }
printf "%-20s %10s %8s %8s %9s %14s %7s\n" catalog commits/s p50_ms p99_ms max_ms pause_ms failed
for kind in builtin etcd etcd-leader-killed; do
  pause=-
  [[ $kind == etcd-leader-killed ]] && pause=$(med "$kind" "$(col max_after_kill_ms)")
  printf "%-20s %10s %8s %8s %9s %14s %7s\n" "$kind" "$(med "$kind" "$(col commits_per_s)")" \
    "$(med "$kind" "$(col p50_ms)")" "$(med "$kind" "$(col p99_ms)")" "$(med "$kind" "$(col max_ms)")" "$pause" \
    "$(awk -F, -v k="$kind" '$1 == k { n += $4 } END { print n + 0 }' etcd_catalog.csv)"
done
echo "(medians of $rounds rounds of $seconds s; replicas=$replicas; pause: the slowest commit running at or after the leader's death)"
echo "etcd costs a commit $(awk -v a="$(med etcd "$(col commits_per_s)")" -v b="$(med builtin "$(col commits_per_s)")" 'BEGIN { printf "%.2fx", b / a }') the time of the built-in catalog (commits/s, built-in / etcd)"
stop_cluster
append_csv etcd_catalog.csv "$csv" && echo && echo "csv: $csv"
