#!/usr/bin/env bash
# Local Pagefile throughput against concurrency level (Pagefile paper,
# section 5, on one machine): random 8 KiB reads and random 8 KiB writes of a
# 2048-page file at concurrency 1, 4 and 12, side by side in one run.
#
# A benchmark, not a test: it asserts nothing about speed. It builds nothing
# either; it runs an existing pf-replay (default: build/tools/pf-replay next
# to this script's tree). See bench/README.md.
#
# usage: bench/local_concurrency.sh [--pf-replay PATH] [--ops N] [--repeat R]
#                                   [--levels "1 4 12"] [--csv OUT] [--tmp DIR]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
file_pages=2048
page_size=8192
parse_options pf_replay="$here/../build/tools/pf-replay" ops=20000 repeat=3 levels="1 4 12" \
  csv="$PWD/local_concurrency.csv" tmp="${TMPDIR:-/tmp}" -- "$@"

need_tools pf_replay
csv=$(rooted "$csv")

make_work pf-bench-local
cd "$work"

read_trace="random-read-${page_size}b-${file_pages}p-${ops}ops.trace"
write_trace="random-write-${page_size}b-${file_pages}p-${ops}ops.trace"
common=(--file data --file-pages "$file_pages" --page-size "$page_size")
"$pf_replay" generate --pattern sequential "${common[@]}" --ops "$file_pages" --write-ratio 1 > fill.trace
"$pf_replay" generate --pattern random "${common[@]}" --ops "$ops" --write-ratio 0 --seed 1 > "$read_trace"
"$pf_replay" generate --pattern random "${common[@]}" --ops "$ops" --write-ratio 1 --seed 2 > "$write_trace"

echo "command: $command_line"
echo "pf-replay: $pf_replay"
echo "machine: $(uname -srm), $(nproc) CPUs; data in $work ($(stat -f -c %T "$work") file system)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "traces: $(head -1 "$read_trace" | sed 's/^# //')"
echo "        $(head -1 "$write_trace" | sed 's/^# //')"
echo "each run: $pf_replay run TRACE --dir data --concurrency N --csv runs.csv --no-progress"
echo

# The file is filled once; every read then finds a written page (in the OS
# page cache: these are cache hits for the disk, not for Pagefile).
"$pf_replay" run fill.trace --dir data --concurrency 12 --no-progress > /dev/null

for ((r = 1; r <= repeat; r++)); do
  for level in $levels; do
    for trace in "$read_trace" "$write_trace"; do
      "$pf_replay" run "$trace" --dir data --concurrency "$level" --csv runs.csv --no-progress \
        > run.out 2> run.err || fail "pf-replay failed on $trace at concurrency $level" run.out run.err
    done
  done
done

# The rows of this run go to OUT, with pf-replay's header when OUT is new.
header=$(head -1 runs.csv)
append_csv runs.csv "$csv" || csv=""

# Median pages/s of the repeats for each (workload, level), and its ratio to
# concurrency 1 (the first level given). Columns are found by name in
# pf-replay's header, so added columns do not shift them.
tail -n +2 runs.csv | awk -F, -v header="$header" -v levels="$levels" -v repeat="$repeat" '
  function col(name) { return index_of[name] }
  BEGIN {
    n = split(header, names, ",")
    for (i = 1; i <= n; i++) index_of[names[i]] = i
    nl = split(levels, level_list, " ")
  }
  {
    workload = ($col("trace") ~ /random-read/) ? "read" : "write"
    key = workload SUBSEP $col("concurrency")
    count[key]++
    rate[key, count[key]] = $col("pages_per_s")
    ms[key, count[key]] = $col("ms_per_page")
  }
  function median(array, key, k,    i, j, t, v) {
    for (i = 1; i <= k; i++) v[i] = array[key, i] + 0
    for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
  }
  END {
    printf "%-6s %11s %12s %10s %9s\n", "random", "concurrency", "pages/s", "ms/page", "vs c=" level_list[1]
    split("read write", workloads, " ")
    for (w = 1; w <= 2; w++) {
      base = 0
      for (l = 1; l <= nl; l++) {
        key = workloads[w] SUBSEP level_list[l]
        k = count[key]
        p = median(rate, key, k)
        if (l == 1) base = p
        printf "%-6s %11s %12.0f %10.4f %8.2fx\n", workloads[w], level_list[l], p, median(ms, key, k), p / base
      }
    }
    printf "(median of %d runs each; 8 KiB pages; writes include the final sync)\n", repeat
  }'
[[ -n "$csv" ]] && echo "rows appended to $csv"
exit 0
