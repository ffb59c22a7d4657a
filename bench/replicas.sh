#!/usr/bin/env bash
# Replicated files against one copy (issue 16), side by side in one run:
# 6 pagefiled on loopback, each EMULATING a disk of 10 ms per uncached page
# (--disk-latency 10) behind a small cache, and one file per replica count
# (R = 1, 2, 3), striped page by page, far larger than the caches.
#
#   reads   random reads in trace order at each concurrency level: R = 1 is
#           bound by the busiest server of each batch; with R copies a read
#           goes to the least busy of its R servers (the power of two
#           choices), which brings the rate towards the ideal of one page
#           per server per 10 ms (600 pages/s with 6 servers).
#   writes  random writes at each level, confirmed when every copy has the
#           page: each costs R disk accesses, so the ideal is 600 / R.
#   sqlite  bench/sqlite_vfs_workload.py through the VFS at concurrency 12
#           (bulk insert, point reads, a full scan, transactions of random
#           rows) on a database with replicas=R, on the same servers: what
#           copies cost a transaction, and give a reader.
#
# A benchmark, not a test: it asserts nothing about speed. Every pf-replay
# run verifies every page it reads; any error or mismatch stops it. See
# bench/README.md.
#
# usage: bench/replicas.sh [--pf-replay PATH] [--pagefiled PATH] [--replicas "1 2 3"]
#            [--levels "1 6 12 24"] [--servers 6] [--latency-ms 10] [--cache-pages 256]
#            [--file-pages 30000] [--page-size 8192] [--seconds 4] [--sqlite-rows 400]
#            [--csv OUT] [--tmp DIR]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options pf_replay="$here/../build/tools/pf-replay" pagefiled="$here/../build/tools/pagefiled" \
  replicas="1 2 3" levels="1 6 12 24" servers=6 latency_ms=10 cache_pages=256 file_pages=30000 \
  page_size=8192 seconds=4 sqlite_rows=400 csv="$PWD/replicas.csv" tmp="${TMPDIR:-/tmp}" -- "$@"

need_tools pf_replay pagefiled
csv=$(rooted "$csv")
make_work pf-bench-replicas
cd "$work"

# run TRACE LEVEL ARGS...: one verified pf-replay run on the bus; prints its
# CSV row (also kept in runs.csv).
run() {
  local trace=$1 level=$2
  shift 2
  "$pf_replay" run "$trace" --bus "$bus" --concurrency "$level" --csv runs.csv --no-progress "$@" \
    > run.out 2> run.err || fail "pf-replay failed on $trace at concurrency $level" run.out run.err
  tail -1 runs.csv
}
field() { echo "$1" | cut -d, -f"$(column_of "$2" runs.csv)"; }
gen() { "$pf_replay" generate --file-pages "$file_pages" --page-size "$page_size" "$@"; }

echo "command: $command_line"
echo "machine: $(uname -srm), $(nproc) CPUs; server data in $work ($(stat -f -c %T "$work") file system)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
ideal_max=$((servers * 1000 / latency_ms))
echo "$servers pagefiled --disk-latency $latency_ms --cache-pages $cache_pages; one file per R of $file_pages pages of $page_size B, stripe"
echo "ideal: one uncached access per server per $latency_ms ms: reads min(c, $servers) x $((1000 / latency_ms)) pages/s (at most $ideal_max),"
echo "writes min(c x R, $servers) x $((1000 / latency_ms)) / R (every copy is written, all at once)"
echo

# Filled without the emulated latency, then restarted with it: caches empty.
start_cluster "$pagefiled" "$work/servers" "$servers" --cache-pages "$cache_pages" || exit 1
for r in $replicas; do
  gen --file "data$r" --pattern sequential --ops "$file_pages" --write-ratio 1 > "fill$r.trace"
  run "fill$r.trace" 24 --policy random --replicas "$r" > /dev/null
done
restart_cluster "$pagefiled" "$work/servers" --disk-latency "$latency_ms" --cache-pages "$cache_pages"

echo "replicas,kind,concurrency,ops,seconds,pages_per_s,ideal,percent_of_ideal" > replicas.csv
printf "%-8s %-6s %5s %6s %8s %9s %7s %8s\n" replicas kind c ops seconds pages/s ideal "%ideal"
for kind in read write; do
  for level in $levels; do
    for r in $replicas; do
      # A read keeps one server busy, a write R of them (at once).
      ratio=0 width=$level
      [[ $kind == write ]] && { ratio=1; width=$((level * r)); }
      busy=$((width < servers ? width : servers))
      ideal=$((busy * 1000 / latency_ms))
      [[ $kind == write ]] && ideal=$((ideal / r))
      ops=$(awk -v i="$ideal" -v s="$seconds" 'BEGIN { n = int(i * s); print (n < 50) ? 50 : n }')
      # The same pages for every R at a level (one seed), a new seed per level
      # and kind so that no run finds the last one's pages in the caches.
      gen --file "data$r" --pattern random --ops "$ops" --write-ratio "$ratio" \
        --seed $((level * 10 + ratio)) > "$kind$r-c$level.trace"
      row=$(run "$kind$r-c$level.trace" "$level")
      rate=$(field "$row" pages_per_s)
      pct=$(awk -v a="$rate" -v i="$ideal" 'BEGIN { printf "%.1f", 100 * a / i }')
      printf "%-8s %-6s %5s %6s %8.2f %9.1f %7s %7s%%\n" "$r" "$kind" "$level" "$ops" \
        "$(field "$row" seconds)" "$rate" "$ideal" "$pct"
      echo "$r,$kind,$level,$ops,$(field "$row" seconds),$rate,$ideal,$pct" >> replicas.csv
    done
  done
done

# SQLite through the VFS, one database per R, on the same (cold-cached) servers.
extension="$(dirname "$pf_replay")/../vfs/pagefile.so"
python=/usr/bin/python3
if [[ $sqlite_rows -gt 0 && -f "$extension" ]]; then
  echo
  echo "== SQLite: bench/sqlite_vfs_workload.py --rows $sqlite_rows at concurrency 12, replicas=R =="
  declare -A took
  for r in $replicas; do
    uri="file:/replicas-r$r.db?vfs=pagefile&concurrency=12&replicas=$r&bus=$bus"
    "$python" "$here/sqlite_vfs_workload.py" --db "$uri" --extension "$extension" --rows "$sqlite_rows" \
      --reads "$sqlite_rows" --txns 2 --txn-rows $((sqlite_rows / 4)) > sqlite.out 2>&1 ||
      fail "the SQLite workloads failed on replicas=$r" sqlite.out
    while read -r name secs ops; do
      took[$r/$name]=$secs
      echo "$r,sqlite-$name,12,$ops,$secs,,," >> replicas.csv
    done < sqlite.out
  done
  printf "%-10s" workload
  for r in $replicas; do printf " %10s" "R=$r s"; done
  for r in $replicas; do [[ $r == 1 ]] || printf " %9s" "R=$r/R=1"; done
  echo
  for name in insert reads scan txn txn-cold; do
    [[ -n "${took[1/$name]:-}" ]] || continue
    printf "%-10s" "$name"
    for r in $replicas; do printf " %10.3f" "${took[$r/$name]}"; done
    for r in $replicas; do
      [[ $r == 1 ]] || printf " %8.2fx" "$(awk -v a="${took[$r/$name]}" -v b="${took[1/$name]}" 'BEGIN { print a / b }')"
    done
    echo
  done
fi
stop_cluster
append_csv replicas.csv "$csv" && echo && echo "csv: $csv"
