#!/usr/bin/env bash
# Why concurrency matters (issue 18, item 4): six pagefiled processes on
# loopback, each emulating one disk of 10 ms a page access (--disk-latency),
# hold two copies of one database. The servers are restarted, so their
# caches are cold, and the same full scan and the same batch of transactions
# run through the SQLite VFS at concurrency 1 on one copy and 12 on the other.
# At 1 each page waits for the one before it; at 12 the VFS keeps 12 requests
# in flight over the six disks, whose latencies overlap.
#
# usage: scripts/demo_latency.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1
work=$2
vfs=$(realpath "$build/vfs/pagefile.so")
pagefiled=$(realpath "$build/tools/pagefiled")
latency_ms=10
servers=6
rows=300  # one row a page: 300 pages of 4 KiB in the table

rm -rf "$work"
mkdir -p "$work"
cd "$work"

pids=()
stop_servers() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_servers EXIT

# start_servers [ADDRESS...]: one pagefiled per data directory sN, on the
# given addresses (a restart) or on free loopback ports; sets $bus.
start_servers() {
  local addresses=("$@") i address
  bus=""
  for i in $(seq 0 $((servers - 1))); do
    mkdir -p "s$i"
    address=${addresses[$i]:-tcp://127.0.0.1:0}
    "$pagefiled" --listen "$address" --dir "s$i" --disk-latency "$latency_ms" > "s$i.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do grep -q 'listening on' "s$i.log" && break; sleep 0.05; done
    address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "s$i.log" | tail -1)
    [ -n "$address" ] || { echo "demo_latency.sh: pagefiled $i did not start" >&2; cat "s$i.log" >&2; exit 1; }
    bus="${bus:+$bus,}$address"
  done
}

# shell DB_URI COMMAND...: the sqlite3 shell with the VFS, on the servers.
shell() { PAGEFILE_BUS="$bus" sqlite3 -batch -bail -cmd ".load $vfs" :memory: ".open $1" "${@:2}"; }

start_servers
echo "== $servers pagefiled on loopback, each emulating a disk of $latency_ms ms a page access: $bus"
for copy in c1 c12; do
  shell "file:$copy.db?vfs=pagefile&concurrency=12" "
    CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER, pad BLOB);
    WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $rows)
    INSERT INTO t SELECT i, 0, randomblob(3000) FROM s;"
done
addresses=(${bus//,/ })
stop_servers
start_servers "${addresses[@]}"
echo "(restarted: their caches are cold)"

# The same transactions on both copies: 10, each adding 1 to 20 rows spread
# over the table.
txns=""
for t in $(seq 0 9); do
  ids=$(seq $((t + 1)) 15 $rows | head -20 | paste -sd, -)
  txns+="BEGIN; UPDATE t SET n = n + 1 WHERE id IN ($ids); COMMIT;"
done

# seconds SQL URI: the wall time the shell's .timer reports for SQL (it
# reports statements read from standard input).
seconds() {
  printf '.load %s\n.open %s\n.timer on\n%s\n' "$vfs" "$2" "$1" | PAGEFILE_BUS="$bus" sqlite3 -batch -bail :memory: | sed -n 's/^Run Time: real \([0-9.]*\).*/\1/p' | awk '{s += $1} END {printf "%.2f", s}'
}
declare -A scan txn
for c in 1 12; do
  uri="file:c$c.db?vfs=pagefile&concurrency=$c"
  scan[$c]=$(seconds "SELECT count(*), sum(length(pad)) FROM t;" "$uri")
  txn[$c]=$(seconds "$txns" "$uri")
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }'; }
echo
printf '%-44s %12s %12s %8s\n' "" "concurrency 1" "concurrency 12" "ratio"
printf '%-44s %11ss %13ss %7sx\n' "cold scan of $rows pages" "${scan[1]}" "${scan[12]}" "$(ratio "${scan[1]}" "${scan[12]}")"
printf '%-44s %11ss %13ss %7sx\n' "10 transactions of 20 rows each" "${txn[1]}" "${txn[12]}" "$(ratio "${txn[1]}" "${txn[12]}")"
echo
echo "At concurrency 1 every page read or written waits its $latency_ms ms in turn; at 12 the VFS keeps"
echo "12 requests in flight over the $servers servers' disks, so their latencies overlap instead of adding up."
for c in 1 12; do
  [ "$(shell "file:c$c.db?vfs=pagefile" "SELECT sum(n) FROM t; PRAGMA integrity_check;" | paste -sd' ' -)" = "200 ok" ] ||
    { echo "demo_latency.sh: copy c$c does not hold the 200 increments" >&2; exit 1; }
done
echo "both copies hold the same 200 increments; integrity_check ok"
