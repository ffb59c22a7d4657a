#!/usr/bin/env bash
# Buffer policies against access patterns (TOPs section 2.1.4 and 2.2): the
# same looping, sequential and random read traces (pf-replay generate)
# replayed under each policy (pf-replay run --policy), on 6 pagefiled on
# loopback each EMULATING a disk of 10 ms per uncached access
# (--disk-latency 10). Reported per run: the client pool's hit ratio (from
# pf-replay's CSV), the servers' hit ratio (their counters, pagefile status),
# the servers' disk reads, and pages/s.
#
# Setup. The file is created and filled once with the servers started
# WITHOUT latency, then before every run the servers are restarted on the
# same addresses with it, so each run starts with empty server caches and
# server counters of its own. The client pool is --client-pages, the servers'
# --server-pages each, both smaller than what a run touches:
#   looping     passes over a loop of --loop-pages (a little larger than the
#               client pool, larger than the servers' pools together)
#   sequential  one scan of the file
#   random      reads over the first --random-pages pages, --hot-share of
#               them on a hot set of --hot-pages (smaller than the client
#               pool), as a database's index roots and busy rows are
# global-sequential runs on the sequential trace only (it is for scans that
# several readers share; on a loop or at random its window reads pages no
# one asks for soon).
#
# Expectations: looping wins on the loop (MRU keeps part of it in both
# pools; LRU and toss-immediately keep none); sequential and
# global-sequential win on the scan (read-ahead on the client; on the
# servers one disk access per window for global-sequential); on random
# reads with a hot set, random (LRU) wins: it keeps the hot pages, where
# looping (MRU) evicts the page just used, which is most often a hot one,
# and sequential (which tosses) keeps nothing. (On uniform random reads LRU
# and MRU hit equally often, as often as the pool is large: no policy can
# win there.)
#
# A benchmark, not a test: it asserts nothing about speed. Every pf-replay
# run verifies every page it reads; an error or mismatch stops it.
#
# usage: bench/policies.sh [--pf-replay PATH] [--pagefiled PATH] [--admin PATH]
#            [--servers 6] [--latency-ms 10] [--server-pages 32]
#            [--client-pages 256] [--loop-pages 288] [--passes 8]
#            [--file-pages 3000] [--random-pages 1024] [--random-ops 3000]
#            [--hot-pages 128] [--hot-share 0.8]
#            [--prefetch-pages 32] [--concurrency 8] [--page-size 8192]
#            [--csv OUT] [--tmp DIR]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options pf_replay="$here/../build/tools/pf-replay" pagefiled="$here/../build/tools/pagefiled" \
  admin="" servers=6 latency_ms=10 server_pages=32 client_pages=256 loop_pages=288 passes=8 \
  file_pages=3000 random_pages=1024 random_ops=3000 hot_pages=128 hot_share=0.8 \
  prefetch_pages=32 concurrency=8 page_size=8192 csv="$PWD/policies.csv" tmp="${TMPDIR:-/tmp}" -- "$@"

need_tools pf_replay pagefiled
[[ -n "$admin" ]] || admin="$(dirname "$pf_replay")/pagefile"
need_tools admin
csv=$(rooted "$csv")
(( loop_pages <= file_pages && random_pages <= file_pages )) || die "--loop-pages and --random-pages must fit --file-pages"

make_work pf-bench-policies
cd "$work"

# cluster ARGS...: (re)starts the servers over $work/s with ARGS, on new ports
# the first time and on the addresses of `bus` after that.
bus=""
cluster() {
  if [[ -z "$bus" ]]; then
    start_cluster "$pagefiled" "$work/s" "$servers" "$@" || exit 1
  else
    restart_cluster "$pagefiled" "$work/s" "$@"
  fi
}

# run TRACE ARGS...: one verified replay; its CSV row is the last of runs.csv.
run() {
  local trace=$1
  shift
  "$pf_replay" run "$trace" --bus "$bus" --concurrency "$concurrency" --csv runs.csv --no-progress \
    "$@" > run.out 2> run.err || fail "pf-replay failed on $trace $*" run.out run.err
}
field() { tail -1 runs.csv | cut -d, -f"$(column_of "$1" runs.csv)"; }
# The servers' hits and misses, summed ("HITS MISSES").
server_counters() {
  local address h m total_h=0 total_m=0
  IFS=, read -r -a listen <<< "$bus"
  for address in "${listen[@]}"; do
    "$admin" status --bus "$address" > status.out 2>&1 || { cat status.out >&2; exit 1; }
    read -r h m < <(awk '$1 ~ /^tcp:/ { print $5, $6 }' status.out)
    total_h=$((total_h + h)); total_m=$((total_m + m))
  done
  echo "$total_h $total_m"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (a + b > 0) ? a / (a + b) : 0 }'; }

gen() { "$pf_replay" generate --file data --file-pages "$file_pages" --page-size "$page_size" "$@"; }
gen --pattern sequential --ops "$file_pages" --write-ratio 1 > fill.trace
gen --pattern looping --loop-pages "$loop_pages" --ops $((loop_pages * passes)) --write-ratio 0 > looping.trace
gen --pattern sequential --ops "$file_pages" --write-ratio 0 > sequential.trace
"$pf_replay" generate --file data --file-pages "$random_pages" --page-size "$page_size" --pattern random --ops "$random_ops" --write-ratio 0 \
  --hot-pages "$hot_pages" --hot-share "$hot_share" > random.trace

echo "command: $command_line"
echo "machine: $(uname -srm), $(nproc) CPUs; load average at start: $(cut -d' ' -f1-3 /proc/loadavg 2> /dev/null || echo unknown)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "servers: $servers x pagefiled --disk-latency $latency_ms (EMULATED disk) --cache-pages $server_pages --prefetch-pages $prefetch_pages"
echo "client: pf-replay run TRACE --policy P --cache-pages $client_pages --concurrency $concurrency (every read verified)"
echo "file: $file_pages pages of $page_size B, striped 1 page per unit; traces (reads only):"
echo "  looping     $passes passes over pages 0..$((loop_pages - 1)) ($((loop_pages * passes)) reads)"
echo "  sequential  one scan of $file_pages pages"
echo "  random      $random_ops reads over pages 0..$((random_pages - 1)), a share $hot_share of them on the hot pages 0..$((hot_pages - 1))"
echo "servers restarted (empty caches, fresh counters) before every run"
echo

cluster --cache-pages "$server_pages"
run fill.trace --policy random
echo "filled without latency; bus: $bus"
echo

printf '%-11s %-18s %10s %10s %9s %9s %10s\n' pattern policy client_hit server_hit pages_s seconds srv_misses
rows=()
for pattern in looping sequential random; do
  policies="random sequential looping"
  [[ $pattern == sequential ]] && policies="$policies global-sequential"
  for policy in $policies; do
    cluster --cache-pages "$server_pages" --disk-latency "$latency_ms" --prefetch-pages "$prefetch_pages"
    run "$pattern.trace" --policy "$policy" --cache-pages "$client_pages"
    read -r sh sm < <(server_counters)
    ch=$(field hits); cm=$(field misses)
    row=$(printf '%-11s %-18s %10s %10s %9.0f %9.2f %10s' "$pattern" "$policy" "$(ratio "$ch" "$cm")" \
      "$(ratio "$sh" "$sm")" "$(field pages_per_s)" "$(field seconds)" "$sm")
    echo "$row"
    rows+=("$pattern,$policy,$(ratio "$ch" "$cm"),$(ratio "$sh" "$sm"),$(field pages_per_s),$(field seconds),$ch,$cm,$sh,$sm")
  done
done

{
  echo "pattern,policy,client_hit_ratio,server_hit_ratio,pages_per_s,seconds,client_hits,client_misses,server_hits,server_misses"
  printf '%s\n' "${rows[@]}"
} > "$csv"
echo
echo "(disk latency EMULATED: $latency_ms ms per uncached access; a global-sequential window read is one access)"
echo "CSV: $csv"
