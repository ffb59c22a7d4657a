#!/usr/bin/env bash
# Every experiment of issue 18, item 3, in one command: the Pagefile paper's
# figures 5, 6 and 7, its open question on scalability, TOPs' policy
# comparison, RAMA's placement comparison and SQLite's own page stream
# replayed, each against real pagefiled processes on loopback. For each it
# writes OUT/NAME.csv (a row per run), OUT/NAME.png (Debian's matplotlib
# through /usr/bin/python3), and at the end OUT/README.md, which shows every
# plot with a paragraph on what it shows and the machine, date, command and
# emulated disk latency. bench/README.md says what each experiment does.
#
#   fig5         ms/page against concurrency, 1 and 8 KiB pages, 6 servers,
#                random pages of a 16 MiB file: every page a server cache hit;
#                every page a miss as the paper measured it (writes each on
#                the disk before the answer: pagefiled --sync dsync); every
#                page a miss of the EMULATED disk (--disk-latency)
#   fig6         bytes/s against page size 1 to 64 KiB at concurrency 12,
#                the same three variants
#   fig7         bytes/s at concurrency 12 against the share of cache hits,
#                local Pagefile against remote, 1 and 8 KiB pages
#   scalability  1, 2, 4 client processes against 1, 2, 4, 6 servers with the
#                EMULATED disk, concurrency 12 each
#   policies     each built-in buffer policy on each access pattern, client
#                pool at 50% and 90% of the file: hit ratio and pages/s
#   placement    hash against stripe placement, units of 1, 8, 64 pages, on
#                sequential, random and strided reads: pages/s and the
#                busiest server's share of the reads
#   sqlite       traces captured from SQLite through the VFS (PAGEFILE_TRACE):
#                the order-entry workload of bench/experiments/order_entry.py
#                and speedtest1, replayed over 6 servers with the EMULATED disk
#                at concurrency 1 to 24
#   replicas     bench/replicas.sh: R = 1, 2, 3 copies of each page on 6
#                servers with the EMULATED disk, random reads and writes
#                against the ideal at concurrency 1 to 24, and what copies
#                cost SQLite's workloads through the VFS
#
# A benchmark: it asserts nothing about speed. Every pf-replay run verifies
# every page it reads, and an error or a mismatch stops the run. --quick runs
# every experiment at a tiny size (under 2 minutes; the meson test
# experiments_quick checks what it writes). An experiment that needs a tool
# this machine lacks says so, and which Debian package has it, and the others
# still run. It builds nothing but speedtest1 (the full run builds it with the
# TCL harness when BUILD/sqlite-harness has none).
#
# usage: bash bench/experiments.sh [--quick] --out DIR [--build DIR]
#            [--only "fig5 fig6 fig7 scalability policies placement sqlite replicas"]
#            [--latency-ms 10] [--tmp DIR]
#   --out DIR      where the CSVs, PNGs and README.md go (created; an
#                  experiment's files are replaced, others left)
#   --build DIR    the build whose tools/pagefiled, tools/pf-replay,
#                  tools/pagefile and vfs/pagefile.so run (default: build)
#   --only "..."   the experiments to run (default: all, in this order)
#   --latency-ms L the emulated disk's latency (default 10, the paper's era)
#   --tmp DIR      where the servers' data and the local Pagefiles live
#                  (default $TMPDIR or /tmp; fig7's local misses read this
#                  file system's disk)
set -euo pipefail

source "$(dirname "$0")/lib.sh"
quick=0
args=()
for arg in "$@"; do
  if [[ $arg == --quick ]]; then quick=1; else args+=("$arg"); fi
done
all_experiments="fig5 fig6 fig7 scalability policies placement sqlite replicas"
parse_options out="" build="$here/../build" only="$all_experiments" latency_ms=10 tmp="${TMPDIR:-/tmp}" \
  -- "${args[@]}"
command_line="bash bench/experiments.sh $*"
[[ -n "$out" ]] || die "--out DIR is required"
for e in $only; do
  [[ " $all_experiments " == *" $e "* ]] || die "--only: unknown experiment '$e' (known: $all_experiments)"
done

[[ -d "$build" ]] || die "no build directory $build (pass --build DIR)"
build=$(cd "$build" && pwd)
pf_replay="$build/tools/pf-replay"
pagefiled="$build/tools/pagefiled"
admin="$build/tools/pagefile"
vfs="$build/vfs/pagefile.so"
for tool in "$pf_replay" "$pagefiled" "$admin"; do
  [[ -x "$tool" ]] || die "no $tool: build it (ninja -C $build) or pass --build DIR"
done
python=/usr/bin/python3
[[ -x "$python" ]] || die "no $python (Debian package python3): the experiments' helpers need it"
util="$here/experiments/util.py"
mkdir -p "$out"
out=$(cd "$out" && pwd)
mkdir -p "$out/raw"
info="$out/run-info.txt"
: > "$info"
note() { echo "$1=$2" >> "$info"; }      # a line of run-info.txt, for the README
say() { echo "[$(date +%H:%M:%S)] $*"; }

# ---------------------------------------------------------------------------
# Sizes. The full run is the issue's; --quick keeps every experiment's shape
# (its variants) with fewer levels, smaller files and fewer operations.
L=$latency_ms
# pick NAME QUICK FULL: NAME is QUICK in a --quick run, FULL in a full one.
pick() { if [[ $quick == 1 ]]; then printf -v "$1" %s "$2"; else printf -v "$1" %s "$3"; fi; }
f5_sizes="1024 8192"
pick f5_levels       "1 4 12"          "1 2 4 6 8 12 16 24"
pick f5_ops          60                3000
pick f5_file_kib     1024              16384

pick f6_sizes        "1024 8192 65536" "1024 2048 4096 8192 16384 32768 65536"
pick f6_ops          60                3000
pick f6_file_kib     1024              16384

f7_sizes="1024 8192"
pick f7_hits         "0 50 100"        "0 25 50 75 90 100"
pick f7_ops          40                1500
pick f7_warm         32                256
pick f7_file_kib     2048              65536

pick sc_servers      "1 2"             "1 2 4 6"
pick sc_clients      "1 2"             "1 2 4"
pick sc_seconds      0.5               5
pick sc_file_pages   256               2048

pick po_file_pages   64                800
pick po_passes       2                 3
pick po_server_pages 4                 32

pl_units="1 8 64"
pick pl_rounds       1                 4
pick pl_ops          48                600

pick sq_levels       "1 12"            "1 2 4 6 8 12 16 24"
pick sq_ops          100               3000
pick sq_txns         20                500
pick sq_items        200               2000
pick sq_customers    30                300
pick sq_size         1                 25

pick re_levels       "1 6"             "1 2 4 6 8 12 16 24"
pick re_counts       "1 2"             "1 2 3"
pick re_file_pages   600               30000
pick re_cache_pages  32                256
pick re_seconds      0.5               4
pick re_sqlite_rows  40                400
servers=6
page=8192  # the page size of the experiments that do not vary it

# ---------------------------------------------------------------------------
# Named clusters. Several run side by side (fig5 keeps three, so that the
# three variants alternate level by level without restarts); each is
# started in parallel and restarted on its own addresses (empty pools,
# fresh counters, other flags). The process ids also go to lib.sh's
# cluster_pids, which the EXIT trap stops.
declare -A cl_bus cl_pids
# launch_servers NAME LISTEN... -- ARGS...: one pagefiled per LISTEN over
# $work/NAME/server-I; waits (at most 10 s) for every "listening on" line.
launch_servers() {
  local name=$1 i=0 try pids=() addresses=() listens=() dir address missing
  shift
  while [[ $1 != -- ]]; do listens+=("$1"); shift; done
  shift
  mkdir -p "$work/$name"
  for address in "${listens[@]}"; do
    dir="$work/$name/server-$i"
    mkdir -p "$dir"
    "$pagefiled" --listen "$address" --dir "$dir" "$@" > "$dir.out" 2>&1 &
    pids+=($!)
    cluster_pids+=($!)
    i=$((i + 1))
  done
  for ((try = 0; try < 200; try++)); do
    addresses=()
    missing=0
    for ((i = 0; i < ${#listens[@]}; i++)); do
      address=$(sed -n 's/^pagefiled: listening on \([^ ]*\).*/\1/p' "$work/$name/server-$i.out" 2> /dev/null || true)
      [[ -n "$address" ]] || { missing=1; break; }
      addresses+=("$address")
    done
    [[ $missing == 0 ]] && break
    sleep 0.05
  done
  if [[ $missing == 1 ]]; then
    echo "$bench: a pagefiled of cluster $name did not start within 10 s:" >&2
    cat "$work/$name"/server-*.out >&2
    exit 1
  fi
  cl_pids[$name]="${pids[*]}"
  cl_bus[$name]=$(IFS=,; echo "${addresses[*]}")
}
# cluster_up NAME N ARGS...: N fresh servers on free loopback ports.
cluster_up() {
  local name=$1 n=$2 listens=() i
  shift 2
  rm -rf "${work:?}/$name"
  for ((i = 0; i < n; i++)); do listens+=(tcp://127.0.0.1:0); done
  launch_servers "$name" "${listens[@]}" -- "$@"
}
# forget_pids PID...: no longer stopped on exit (they have ended).
forget_pids() {
  local pid keep=()
  for pid in "${cluster_pids[@]}"; do [[ " $* " == *" $pid "* ]] || keep+=("$pid"); done
  cluster_pids=("${keep[@]}")
}
# cluster_down NAME: its servers stopped (by process id) and waited for.
cluster_down() {
  local name=$1 pid
  for pid in ${cl_pids[$name]}; do kill "$pid" 2> /dev/null || true; done
  for pid in ${cl_pids[$name]}; do wait "$pid" 2> /dev/null || true; done
  forget_pids ${cl_pids[$name]}
  cl_pids[$name]=""
}
# cluster_restart NAME ARGS...: the same servers over the same directories on
# the same addresses (so the catalog's records still name them) with ARGS.
cluster_restart() {
  local name=$1 listens
  shift
  cluster_down "$name"
  IFS=, read -r -a listens <<< "${cl_bus[$name]}"
  launch_servers "$name" "${listens[@]}" -- "$@"
}
# server_counts NAME: a line per server, in bus order: "PAGES_READ HITS MISSES"
# (their counters since they started; pagefile status over the whole bus:
# a bus of one server would make that server a catalog of its own).
server_counts() {
  "$admin" status --bus "${cl_bus[$1]}" > "$work/status.out" 2>&1 ||
    fail "pagefile status --bus ${cl_bus[$1]} failed" "$work/status.out"
  local address
  IFS=, read -r -a addresses <<< "${cl_bus[$1]}"
  for address in "${addresses[@]}"; do
    awk -v a="$address" '$1 == a { print $3, $5, $6; found = 1 } END { if (!found) print "0 0 0" }' "$work/status.out"
  done
}
# delta BEFORE AFTER: per-server differences of two server_counts.
delta() { paste -d' ' <(echo "$1") <(echo "$2") | awk '{ print $4 - $1, $5 - $2, $6 - $3 }'; }
sum_column() { echo "$1" | awk -v c="$2" '{ s += $c } END { print s + 0 }'; }
busiest_share() { echo "$1" | awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%.4f", (s > 0) ? m / s : 0 }'; }
per_server_list() { echo "$1" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 }'; }

# ---------------------------------------------------------------------------
# pf-replay. replay RAW TRACE CONCURRENCY ARGS... runs one verified replay,
# its pf-replay CSV row appended to OUT/raw/RAW-pf-replay.csv; field NAME
# reads that row.
replay() {
  local raw=$1 trace=$2 level=$3
  shift 3
  last_raw="$out/raw/$raw-pf-replay.csv"
  "$pf_replay" run "$trace" --concurrency "$level" --csv "$last_raw" --no-progress "$@" \
    > "$work/run.out" 2> "$work/run.err" || fail "pf-replay run $trace --concurrency $level $* failed" "$work/run.out" "$work/run.err"
}
field() { tail -1 "$last_raw" | cut -d, -f"$(column_of "$1" "$last_raw")"; }
gen() { "$pf_replay" generate "$@"; }
# A seed per generated trace, so no run reads the pages of the one before
# it in the same order (the generator's first draws do not depend on --ops).
seed=100
next_seed() { seed=$((seed + 1)); }
# fill WHERE NAME PAGE_SIZE PAGES ARGS...: writes every page of NAME once
# (untimed set-up), WHERE being "--bus BUS" or "--dir DIR".
fill() {
  local where=$1 target=$2 name=$3 size=$4 pages=$5
  shift 5
  gen --pattern sequential --file "$name" --file-pages "$pages" --ops "$pages" --write-ratio 1 \
    --page-size "$size" > "$work/fill.trace"
  replay setup "$work/fill.trace" 24 "$where" "$target" --policy random "$@"
}
# warm WHERE TARGET NAME PAGE_SIZE PAGES [FIRST]: reads pages [FIRST, FIRST +
# PAGES) once (FIRST default 0).
warm() {
  "$python" "$util" warm --file "$3" --first "${6:-0}" --pages "$5" --page-size "$4" > "$work/warm.trace"
  replay setup "$work/warm.trace" 24 "$1" "$2" --policy random
}
rate() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a * b }'; }

load() { cut -d' ' -f1-3 /proc/loadavg 2> /dev/null || echo unknown; }
start_seconds=$SECONDS
make_work pf-experiments
cd "$work"
note command "$command_line"
note date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
note nproc "$(nproc)"
note memory "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
note kernel "$(uname -srm)"
note cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
note filesystem "$(stat -f -c %T "$work") ($tmp)"
if [[ "$(stat -f -c %T "$work")" == tmpfs ]]; then
  note disk_warning "the data are on tmpfs: the synchronous writes of fig5 and fig6 and the local and remote-disk misses of fig7 reach no disk (pass --tmp DIR on a disk)"
  say "warning: $tmp is tmpfs: synchronous writes and fig7's disk misses reach no disk (pass --tmp DIR on a disk)"
fi
note load_start "$(load)"
note latency_ms "$L"
note quick "$quick"
note build "$build"
note commit "$(git -C "$here/.." rev-parse --short HEAD 2> /dev/null || echo unknown)"
note experiments "$only"
say "experiments: $only$([[ $quick == 1 ]] && echo " (quick)"); output in $out; data in $work"

plots=1
if ! "$python" -c 'import matplotlib' 2> /dev/null; then
  plots=0
  note plots_skipped "$python has no matplotlib: install Debian's python3-matplotlib (scripts/setup.sh does) for the PNGs"
  say "plots skipped: $python has no matplotlib (Debian package python3-matplotlib)"
fi

# ---------------------------------------------------------------------------
# fig5 and fig6: every page a hit, a synchronous-write miss, an emulated miss.
# hit_miss NAME SIZES LEVELS OPS FILE_KIB
hit_miss() {
  local name=$1 sizes=$2 levels=$3 ops=$4 file_kib=$5 size pages total=0 level variant csv before after d trace
  csv="$out/$name.csv"
  rm -f "$out/raw/$name-pf-replay.csv"
  echo "page_size,variant,op,concurrency,ops,pages,seconds,ms_per_page,pages_per_s,bytes_per_s,server_hits,server_misses,servers,latency_ms,sync_mode" > "$csv"
  for size in $sizes; do total=$((total + file_kib * 1024 / size)); done
  # hit: pools larger than every file; sync: no pool, every write O_DSYNC;
  # emulated: no pool, every access waits L ms on the server's one arm.
  cluster_up "$name-hit" "$servers" --cache-pages "$total"
  cluster_up "$name-sync" "$servers" --cache-pages 0
  cluster_up "$name-emu" "$servers" --cache-pages 0
  for size in $sizes; do
    pages=$((file_kib * 1024 / size))
    for variant in hit sync emu; do fill --bus "${cl_bus[$name-$variant]}" "data$size" "$size" "$pages"; done
    warm --bus "${cl_bus[$name-hit]}" "data$size" "$size" "$pages"
  done
  # Filled first: 600 pages/s would take minutes to fill.
  cluster_restart "$name-sync" --cache-pages 0 --sync dsync
  cluster_restart "$name-emu" --cache-pages 0 --disk-latency "$L"
  # An untimed read of a page on each server of each file, so that no timed
  # run pays for the servers opening their shares after the restart.
  for size in $sizes; do
    for variant in sync emu; do warm --bus "${cl_bus[$name-$variant]}" "data$size" "$size" "$servers"; done
  done
  say "$name: 3 x $servers servers; files of $file_kib KiB in pages of $sizes; levels $levels; $ops ops a run"
  for size in $sizes; do
    pages=$((file_kib * 1024 / size))
    for level in $levels; do
      # Side by side: the three variants alternate at each level.
      for variant in hit sync emu; do
        next_seed
        trace="$work/$name-$size-c$level-$variant.trace"
        if [[ $variant == sync ]]; then
          gen --pattern random --file "data$size" --file-pages "$pages" --ops "$ops" --write-ratio 1 \
            --page-size "$size" --seed "$seed" > "$trace"
        else
          gen --pattern random --file "data$size" --file-pages "$pages" --ops "$ops" --write-ratio 0 \
            --page-size "$size" --seed "$seed" > "$trace"
        fi
        before=$(server_counts "$name-$variant")
        replay "$name" "$trace" "$level" --bus "${cl_bus[$name-$variant]}"
        after=$(server_counts "$name-$variant")
        d=$(delta "$before" "$after")
        case $variant in
          hit) echo "$size,hit,read,$level,$(field ops),$(field pages),$(field seconds),$(field ms_per_page),$(field pages_per_s),$(rate "$(field pages_per_s)" "$size"),$(sum_column "$d" 2),$(sum_column "$d" 3),$servers,0,fdatasync" ;;
          sync) echo "$size,miss-sync-write,write,$level,$(field ops),$(field pages),$(field seconds),$(field ms_per_page),$(field pages_per_s),$(rate "$(field pages_per_s)" "$size"),,,$servers,0,dsync" ;;
          emu) echo "$size,miss-emulated,read,$level,$(field ops),$(field pages),$(field seconds),$(field ms_per_page),$(field pages_per_s),$(rate "$(field pages_per_s)" "$size"),$(sum_column "$d" 2),$(sum_column "$d" 3),$servers,$L,fdatasync" ;;
        esac >> "$csv"
      done
      say "$name: $size B c$level: $(tail -3 "$csv" | cut -d, -f2,8 | tr '\n' ' ')(variant,ms/page)"
    done
  done
  cluster_down "$name-hit"; cluster_down "$name-sync"; cluster_down "$name-emu"
}

exp_fig5() {
  hit_miss fig5 "$f5_sizes" "$f5_levels" "$f5_ops" "$f5_file_kib"
  note fig5_params "sizes=${f5_sizes// /,} levels=${f5_levels// /,} ops=$f5_ops file_kib=$f5_file_kib servers=$servers"
}
exp_fig6() {
  hit_miss fig6 "$f6_sizes" 12 "$f6_ops" "$f6_file_kib"
  note fig6_params "sizes=${f6_sizes// /,} levels=12 ops=$f6_ops file_kib=$f6_file_kib servers=$servers"
}

# ---------------------------------------------------------------------------
# fig7: local against remote by the share of hits. A hit reads a page of the
# warm set (read once before the run); a miss reads a page read by nothing
# before it in this run. Local and remote-disk misses go to this machine's
# disk: the files' pages are dropped from the page cache first
# (posix_fadvise DONTNEED), and the bytes each run made the kernel read from
# storage are counted. remote-emulated misses wait for the emulated disk.
exp_fig7() {
  local csv="$out/fig7.csv" size pages hit trace d before after io0 io1 kib h m shp group
  rm -f "$out/raw/fig7-pf-replay.csv"
  echo "page_size,mode,hit_percent,ops,pages,seconds,pages_per_s,bytes_per_s,server_hit_percent,disk_read_kib,latency_ms" > "$csv"
  local big=$((f7_file_kib * 2))  # pages: more than the file of 1 KiB pages
  cluster_up f7disk "$servers" --cache-pages "$big"
  cluster_up f7emu "$servers" --cache-pages "$big"
  mkdir -p "$work/f7local"
  for size in $f7_sizes; do
    pages=$((f7_file_kib * 1024 / size))
    fill --dir "$work/f7local" "data$size" "$size" "$pages"
    fill --bus "${cl_bus[f7disk]}" "data$size" "$size" "$pages"
    fill --bus "${cl_bus[f7emu]}" "data$size" "$size" "$pages"
  done
  say "fig7: local Pagefile in $work/f7local, 2 x $servers servers; files of $f7_file_kib KiB; warm set $f7_warm pages; $f7_ops reads a run at concurrency 12"
  for size in $f7_sizes; do
    pages=$((f7_file_kib * 1024 / size))
    # Cold pages one per 4 KiB of every layout: the local file's and each
    # server's share of the striped file (servers x 4096 / size pages).
    group=1
    ((size >= 4096)) || group=$((servers * 4096 / size))
    for hit in $f7_hits; do
      next_seed
      trace="$work/fig7-$size-h$hit.trace"
      "$python" "$util" hitmix --file "data$size" --file-pages "$pages" --warm-pages "$f7_warm" --ops "$f7_ops" \
        --hit-percent "$hit" --page-size "$size" --seed "$seed" --group-pages "$group" > "$trace"
      # local: the OS page cache is the cache; a miss reads the disk.
      "$python" "$util" evict "$work/f7local" > /dev/null
      warm --dir "$work/f7local" "data$size" "$size" "$f7_warm" $((pages - f7_warm))
      last_raw="$out/raw/fig7-pf-replay.csv"
      "$python" "$util" rusage "$work/rusage.out" -- "$pf_replay" run "$trace" --dir "$work/f7local" --concurrency 12 \
        --csv "$last_raw" --no-progress > "$work/run.out" 2> "$work/run.err" ||
        fail "pf-replay run $trace (local) failed" "$work/run.out" "$work/run.err"
      kib=$(sed -n 's/^inblock_kib=//p' "$work/rusage.out")
      echo "$size,local-disk,$hit,$(field ops),$(field pages),$(field seconds),$(field pages_per_s),$(rate "$(field pages_per_s)" "$size"),,$kib,0" >> "$csv"
      # remote-disk: the servers' pools are the cache; a miss reads the disk.
      cluster_restart f7disk --cache-pages "$big"
      "$python" "$util" evict "$work/f7disk" > /dev/null
      warm --bus "${cl_bus[f7disk]}" "data$size" "$size" "$f7_warm" $((pages - f7_warm))
      before=$(server_counts f7disk)
      io0=$("$python" "$util" io_read_kib ${cl_pids[f7disk]})
      replay fig7 "$trace" 12 --bus "${cl_bus[f7disk]}"
      io1=$("$python" "$util" io_read_kib ${cl_pids[f7disk]})
      d=$(delta "$before" "$(server_counts f7disk)")
      h=$(sum_column "$d" 2); m=$(sum_column "$d" 3)
      shp=$(awk -v h="$h" -v m="$m" 'BEGIN { printf "%.1f", (h + m > 0) ? 100 * h / (h + m) : 0 }')
      echo "$size,remote-disk,$hit,$(field ops),$(field pages),$(field seconds),$(field pages_per_s),$(rate "$(field pages_per_s)" "$size"),$shp,$((io1 - io0)),0" >> "$csv"
      # remote-emulated: the servers' pools are the cache; a miss waits L ms.
      cluster_restart f7emu --cache-pages "$big" --disk-latency "$L"
      warm --bus "${cl_bus[f7emu]}" "data$size" "$size" "$f7_warm" $((pages - f7_warm))
      before=$(server_counts f7emu)
      replay fig7 "$trace" 12 --bus "${cl_bus[f7emu]}"
      d=$(delta "$before" "$(server_counts f7emu)")
      h=$(sum_column "$d" 2); m=$(sum_column "$d" 3)
      shp=$(awk -v h="$h" -v m="$m" 'BEGIN { printf "%.1f", (h + m > 0) ? 100 * h / (h + m) : 0 }')
      echo "$size,remote-emulated,$hit,$(field ops),$(field pages),$(field seconds),$(field pages_per_s),$(rate "$(field pages_per_s)" "$size"),$shp,,$L" >> "$csv"
      say "fig7: $size B $hit% hits: $(tail -3 "$csv" | cut -d, -f2,8 | tr '\n' ' ')(mode,bytes/s)"
    done
  done
  cluster_down f7disk; cluster_down f7emu
  note fig7_params "sizes=${f7_sizes// /,} hits=${f7_hits// /,} ops=$f7_ops warm_pages=$f7_warm file_kib=$f7_file_kib servers=$servers concurrency=12"
}

# ---------------------------------------------------------------------------
# scalability: C pf-replay processes at once, each on a file of its own,
# against N servers with the emulated disk and no pools.
exp_scalability() {
  local csv="$out/scalability.csv" n c i ops t0 t1 pids pages total_pages rates raw
  rm -f "$out/raw/scalability-pf-replay.csv"
  echo "servers,clients,concurrency,latency_ms,ops_per_client,pages_total,wall_seconds,total_pages_per_s,per_client_pages_per_s,min_client_pages_per_s,max_client_pages_per_s" > "$csv"
  local max_clients=0
  for c in $sc_clients; do ((c > max_clients)) && max_clients=$c; done
  for n in $sc_servers; do
    cluster_up sc "$n" --cache-pages 0
    for ((i = 0; i < max_clients; i++)); do fill --bus "${cl_bus[sc]}" "client$i" "$page" "$sc_file_pages"; done
    for c in $sc_clients; do
      cluster_restart sc --cache-pages 0 --disk-latency "$L"
      # Sized for about sc_seconds at the ideal: n x 1000/L pages/s shared by c.
      ops=$(awk -v s="$sc_seconds" -v n="$n" -v l="$L" -v c="$c" 'BEGIN { o = int(s * n * 1000 / l / c + 0.999); print (o < 20) ? 20 : o }')
      pids=()
      for ((i = 0; i < c; i++)); do
        next_seed
        gen --pattern random --file "client$i" --file-pages "$sc_file_pages" --ops "$ops" --write-ratio 0 \
          --page-size "$page" --seed "$seed" > "$work/sc-$i.trace"
        rm -f "$work/sc-$i.csv"
      done
      t0=$(date +%s.%N)
      for ((i = 0; i < c; i++)); do
        "$pf_replay" run "$work/sc-$i.trace" --bus "${cl_bus[sc]}" --concurrency 12 --csv "$work/sc-$i.csv" \
          --no-progress > "$work/sc-$i.out" 2>&1 &
        pids+=($!)
        cluster_pids+=($!)  # stopped on exit, as the servers are
      done
      for ((i = 0; i < c; i++)); do
        wait "${pids[i]}" || fail "pf-replay client $i of $c against $n servers failed" "$work/sc-$i.out"
      done
      forget_pids "${pids[@]}"
      t1=$(date +%s.%N)
      raw="$out/raw/scalability-pf-replay.csv"
      for ((i = 0; i < c; i++)); do append_csv "$work/sc-$i.csv" "$raw" || true; done
      last_raw="$work/sc-0.csv"
      local col_pages col_rate
      col_pages=$(column_of pages "$work/sc-0.csv")
      col_rate=$(column_of pages_per_s "$work/sc-0.csv")
      total_pages=0
      rates=""
      for ((i = 0; i < c; i++)); do
        pages=$(tail -1 "$work/sc-$i.csv" | cut -d, -f"$col_pages")
        total_pages=$((total_pages + pages))
        rates+="$(tail -1 "$work/sc-$i.csv" | cut -d, -f"$col_rate") "
      done
      echo "$rates" | tr ' ' '\n' | awk -v n="$n" -v c="$c" -v l="$L" -v o="$ops" -v p="$total_pages" -v t0="$t0" -v t1="$t1" '
        NF { s += $1; k++; if (min == "" || $1 < min) min = $1; if ($1 > max) max = $1 }
        END { w = t1 - t0; printf "%d,%d,12,%s,%d,%d,%.3f,%.1f,%.1f,%.1f,%.1f\n", n, c, l, o, p, w, p / w, s / k, min, max }' >> "$csv"
      say "scalability: $n servers, $c clients: $(tail -1 "$csv" | cut -d, -f8,9) (total, per-client pages/s)"
    done
    cluster_down sc
  done
  note scalability_params "servers=${sc_servers// /,} clients=${sc_clients// /,} seconds=$sc_seconds file_pages=$sc_file_pages page_size=$page concurrency=12"
}

# ---------------------------------------------------------------------------
# policies: each built-in policy on each pattern, the client's pool at 50%
# and 90% of the file, 6 servers with the emulated disk and small pools,
# restarted before each run (empty pools). Beside each measured hit ratio,
# the one pf-replay stats simulates for the same trace and pool.
exp_policies() {
  local csv="$out/policies.csv" p=$po_file_pages pattern policy pct pool d sh sm sim
  rm -f "$out/raw/policies-pf-replay.csv"
  echo "pattern,policy,pool_percent,pool_pages,file_pages,reads,client_hit_ratio,simulated_hit_ratio,server_hit_ratio,pages_per_s,seconds,prefetch_used,prefetch_wasted" > "$csv"
  local hot=$((p / 10))
  gen --pattern sequential --file data --file-pages "$p" --ops "$p" --page-size "$page" > "$work/po-scan.trace"
  gen --pattern looping --file data --file-pages "$p" --ops $((p * po_passes)) --page-size "$page" > "$work/po-loop.trace"
  next_seed
  gen --pattern random --file data --file-pages "$p" --ops $((2 * p)) --page-size "$page" --seed "$seed" > "$work/po-uniform.trace"
  next_seed
  gen --pattern random --file data --file-pages "$p" --ops $((2 * p)) --page-size "$page" --seed "$seed" \
    --hot-pages "$hot" --hot-share 0.9 > "$work/po-hot.trace"
  local p50=$((p / 2)) p90=$((p * 9 / 10))
  for pattern in scan loop uniform hot; do
    "$pf_replay" stats "$work/po-$pattern.trace" --pool-pages "$p50" --pool-pages "$p90" --read-ahead 12 \
      --csv "$work/po-$pattern-stats.csv" > /dev/null || fail "pf-replay stats po-$pattern.trace failed" /dev/null
    sed "s/^/$pattern,/" "$work/po-$pattern-stats.csv" | tail -n +2
  done | { echo "pattern,policy,pool_pages,hit_ratio"; cat; } > "$out/raw/policies-simulated.csv"
  cluster_up po "$servers" --cache-pages "$po_server_pages"
  fill --bus "${cl_bus[po]}" data "$page" "$p"
  say "policies: file of $p pages, client pools $p50 and $p90 pages, servers' pools $po_server_pages pages each, EMULATED $L ms"
  for pattern in scan loop uniform hot; do
    for pct in 50 90; do
      pool=$((pct == 50 ? p50 : p90))
      for policy in random sequential looping global-sequential; do
        cluster_restart po --cache-pages "$po_server_pages" --disk-latency "$L"
        # (--window 24: room in the client's window for 12 pages of read-ahead
        # beside the 12 reads in flight, as pf-replay stats --read-ahead 12
        # supposes.)
        replay policies "$work/po-$pattern.trace" 12 --bus "${cl_bus[po]}" --policy "$policy" --cache-pages "$pool" --window 24
        d=$(server_counts po)
        sh=$(sum_column "$d" 2); sm=$(sum_column "$d" 3)
        sim=$(awk -F, -v pt="$pattern" -v po="$policy" -v n="$pool" '$1 == pt && $2 == po && $3 == n { print $4 }' "$out/raw/policies-simulated.csv")
        echo "$pattern,$policy,$pct,$pool,$p,$(field reads),$(awk -v h="$(field hits)" -v m="$(field misses)" 'BEGIN { printf "%.4f", (h + m > 0) ? h / (h + m) : 0 }'),$sim,$(awk -v h="$sh" -v m="$sm" 'BEGIN { printf "%.4f", (h + m > 0) ? h / (h + m) : 0 }'),$(field pages_per_s),$(field seconds),$(field prefetch_used),$(field prefetch_wasted)" >> "$csv"
      done
      say "policies: $pattern, pool $pct%: $(tail -4 "$csv" | cut -d, -f2,7,10 | tr '\n' ' ')(policy,hit ratio,pages/s)"
    done
  done
  cluster_down po
  note policies_params "file_pages=$p passes=$po_passes hot_pages=$hot hot_share=0.9 server_pages=$po_server_pages page_size=$page concurrency=12 window=24 servers=$servers"
}

# ---------------------------------------------------------------------------
# placement: hash and stripe in units of 1, 8, 64 pages, one file each, 6
# servers with the emulated disk and no pools; per run the servers' reads
# (their counters before and after).
exp_placement() {
  local csv="$out/placement.csv" unit placement pattern p trace before d name
  rm -f "$out/raw/placement-pf-replay.csv"
  echo "pattern,placement,stripe_pages,stride,reads,seconds,pages_per_s,busiest_server_share,server_reads" > "$csv"
  local max_unit=0
  for unit in $pl_units; do ((unit > max_unit)) && max_unit=$unit; done
  p=$((servers * max_unit * pl_rounds))
  cluster_up pl "$servers" --cache-pages 0
  for unit in $pl_units; do
    for placement in hash stripe; do
      fill --bus "${cl_bus[pl]}" "pl-$placement-$unit" "$page" "$p" --placement "$placement" --stripe-pages "$unit"
    done
  done
  cluster_restart pl --cache-pages 0 --disk-latency "$L"
  say "placement: files of $p pages, $servers servers, EMULATED $L ms, no pools; $pl_ops reads a run at concurrency 12"
  for unit in $pl_units; do
    for pattern in sequential random strided; do
      for placement in hash stripe; do
        name="pl-$placement-$unit"
        trace="$work/$name-$pattern.trace"
        case $pattern in
          sequential) gen --pattern sequential --file "$name" --file-pages "$p" --ops "$pl_ops" --page-size "$page" > "$trace" ;;
          random) gen --pattern random --file "$name" --file-pages "$p" --ops "$pl_ops" --page-size "$page" --seed $((seed + unit)) > "$trace" ;;
          strided) "$python" "$util" strided --file "$name" --file-pages "$p" --stride $((servers * unit)) --wrap "$unit" --ops "$pl_ops" \
                     --page-size "$page" > "$trace" ;;
        esac
        before=$(server_counts pl)
        replay placement "$trace" 12 --bus "${cl_bus[pl]}" --policy random
        d=$(delta "$before" "$(server_counts pl)")
        echo "$pattern,$placement,$unit,$([[ $pattern == strided ]] && echo $((servers * unit))),$(field reads),$(field seconds),$(field pages_per_s),$(busiest_share "$d"),$(per_server_list "$d")" >> "$csv"
      done
      say "placement: unit $unit, $pattern: $(tail -2 "$csv" | cut -d, -f2,7,8 | tr '\n' ' ')(placement,pages/s,busiest share)"
    done
  done
  cluster_down pl
  note placement_params "file_pages=$p units=${pl_units// /,} reads=$pl_ops page_size=$page concurrency=12 servers=$servers"
}

# ---------------------------------------------------------------------------
# sqlite: traces captured through the VFS (PAGEFILE_TRACE, issue 18 item 1)
# and replayed over 6 servers with the emulated disk at each level.
skip() {  # skip EXPERIMENT REASON: says so, and the README will
  say "$1: skipped: $2"
  note "skipped_$1" "$2"
}
# capture_order_entry TRACE: loads the database (not captured), then runs
# the transactions with PAGEFILE_TRACE=TRACE.
capture_order_entry() {
  local db="$work/oe.db" oe="$here/experiments/order_entry.py"
  local sizes=(--items "$sq_items" --customers "$sq_customers" --txns "$sq_txns")
  rm -f "$db" "$1"
  # On the local default store whatever the environment says (no bus).
  env -u PAGEFILE_BUS -u PAGEFILE_TRACE "$python" "$oe" --db "file:$db?vfs=pagefile" --extension "$vfs" --phase load "${sizes[@]}" \
    > "$work/oe-load.out" 2>&1 || fail "order_entry.py --phase load failed" "$work/oe-load.out"
  env -u PAGEFILE_BUS PAGEFILE_TRACE="$1" "$python" "$oe" --db "file:$db?vfs=pagefile" --extension "$vfs" --phase run "${sizes[@]}" \
    > "$work/oe-run.out" 2>&1 || fail "order_entry.py --phase run failed" "$work/oe-run.out"
}
# speedtest1 TRACE: SQLite's speedtest1 on the VFS's default with PAGEFILE_TRACE.
capture_speedtest1() {
  local st="$build/sqlite-harness/bld/speedtest1"
  if [[ ! -x "$st" ]]; then
    if [[ $quick == 1 ]]; then
      speedtest1_missing="speedtest1 is not built and --quick does not build it (bash tests/sqlite/build-harness $build/sqlite-harness, or a full run, builds it)"
      return 1
    fi
    say "sqlite: building speedtest1 (tests/sqlite/build-harness $build/sqlite-harness)"
    if ! "$here/../tests/sqlite/build-harness" "$build/sqlite-harness" > "$work/harness.out" 2>&1 || [[ ! -x "$st" ]]; then
      speedtest1_missing="tests/sqlite/build-harness could not build speedtest1 (it needs apt's deb-src, tcl-dev and a compiler): $(tail -1 "$work/harness.out")"
      return 1
    fi
  fi
  rm -f "$work/st.db" "$1"
  (cd "$work" && env -u PAGEFILE_BUS PAGEFILE_TRACE="$1" PAGEFILE_TEST_EXTENSION="$vfs" PAGEFILE_VFS_DEFAULT=1 \
    "$st" --size "$sq_size" "$work/st.db" > "$work/st.out" 2>&1) || fail "speedtest1 --size $sq_size failed" "$work/st.out"
}
exp_sqlite() {
  local csv="$out/sqlite.csv" workload trace level kept total fillt
  rm -f "$out/raw/sqlite-pf-replay.csv" "$out/raw/sqlite-"*
  if [[ ! -f "$vfs" ]]; then skip sqlite "no $vfs: build it (ninja -C $build)"; return; fi
  if ! "$python" -c 'import sqlite3; sqlite3.connect(":memory:").enable_load_extension(True)' 2> /dev/null; then
    skip sqlite "$python's sqlite3 cannot load extensions (Debian's python3 can)"; return
  fi
  capture_order_entry "$work/order-entry.trace"
  if [[ ! -s "$work/order-entry.trace" ]]; then
    skip sqlite "the VFS wrote no trace with PAGEFILE_TRACE=$work/order-entry.trace: this build has no trace capture (issue 18, item 1)"
    return
  fi
  local workloads=(order-entry)
  speedtest1_missing=""
  if capture_speedtest1 "$work/speedtest1.trace" && [[ -s "$work/speedtest1.trace" ]]; then
    workloads+=(speedtest1)
  else
    note sqlite_speedtest1_skipped "${speedtest1_missing:-speedtest1 ran but wrote no trace}"
    say "sqlite: speedtest1 skipped: ${speedtest1_missing:-it wrote no trace}"
  fi
  echo "workload,concurrency,ops,pages,reads,writes,syncs,seconds,ms_per_page,pages_per_s,trace_page_ops,replayed_page_ops,latency_ms,servers" > "$csv"
  for workload in "${workloads[@]}"; do
    trace="$work/$workload-replay.trace"
    "$python" "$util" trace_prefix "$work/$workload.trace" "$sq_ops" > "$trace" 2> "$work/prefix.out"
    read -r kept total < "$work/prefix.out"
    cp "$trace" "$out/raw/sqlite-$workload-replayed.trace"
    "$pf_replay" stats "$trace" --csv "$out/raw/sqlite-$workload-stats.csv" > "$out/raw/sqlite-$workload-stats.txt" 2>&1 ||
      fail "pf-replay stats on the $workload trace failed" "$out/raw/sqlite-$workload-stats.txt"
    # The order-entry trace starts on a loaded database: its pages are
    # written first (untimed), so that its reads find pages on the disk.
    fillt=""
    if [[ $workload == order-entry ]]; then
      fillt="$work/$workload-fill.trace"
      "$python" "$util" trace_fill "$trace" > "$fillt"
    fi
    say "sqlite: $workload: $total page operations captured, $kept replayed"
    for level in $sq_levels; do
      cluster_up sq "$servers" --cache-pages 64
      [[ -z "$fillt" ]] || replay setup "$fillt" 24 --bus "${cl_bus[sq]}"
      cluster_restart sq --cache-pages 64 --disk-latency "$L"
      replay sqlite "$trace" "$level" --bus "${cl_bus[sq]}"
      echo "$workload,$level,$(field ops),$(field pages),$(field reads),$(field writes),$(field syncs),$(field seconds),$(field ms_per_page),$(field pages_per_s),$total,$kept,$L,$servers" >> "$csv"
      cluster_down sq
      say "sqlite: $workload c$level: $(field ms_per_page) ms/page"
    done
  done
  note sqlite_params "levels=${sq_levels// /,} replay_ops=$sq_ops txns=$sq_txns items=$sq_items customers=$sq_customers speedtest1_size=$sq_size servers=$servers server_pages=64"
}

# ---------------------------------------------------------------------------
# replicas: bench/replicas.sh (issue 16) on a cluster of its own, its CSV
# kept as the experiment's: reads and writes per replica count and level
# against the ideal, then SQLite's workloads per count at concurrency 12.
exp_replicas() {
  local csv="$out/replicas.csv"
  say "replicas: R = ${re_counts// /, } on $servers servers, EMULATED $L ms, files of $re_file_pages pages; levels ${re_levels// /, }"
  bash "$here/replicas.sh" --pf-replay "$pf_replay" --pagefiled "$pagefiled" --replicas "$re_counts" \
    --levels "$re_levels" --servers "$servers" --latency-ms "$L" --cache-pages "$re_cache_pages" \
    --file-pages "$re_file_pages" --page-size "$page" --seconds "$re_seconds" \
    --sqlite-rows "$([[ -f "$vfs" ]] && echo "$re_sqlite_rows" || echo 0)" --csv "$csv" --tmp "$tmp" \
    > "$out/raw/replicas.txt" 2>&1 || fail "bench/replicas.sh failed" "$out/raw/replicas.txt"
  local top=${re_levels##* }
  say "replicas: $(awk -F, -v c="$top" '$2 == "read" && $3 == c { printf "R=%s reads c%s %s%% of the ideal; ", $1, c, $8 }' "$csv")"
  note replicas_params "levels=${re_levels// /,} counts=${re_counts// /,} file_pages=$re_file_pages server_pages=$re_cache_pages seconds=$re_seconds sqlite_rows=$re_sqlite_rows page_size=$page servers=$servers"
}

# ---------------------------------------------------------------------------
for e in $only; do
  t=$SECONDS
  rm -f "$out/$e.csv" "$out/$e.png"
  "exp_$e"
  note "seconds_$e" $((SECONDS - t))
done
note load_end "$(load)"
note wall_seconds $((SECONDS - start_seconds))
if [[ $plots == 1 ]]; then
  "$python" "$here/experiments/report.py" plot "$out" || die "plotting failed"
fi
"$python" "$here/experiments/report.py" readme "$out" || die "writing $out/README.md failed"
say "done in $((SECONDS - start_seconds)) s: $out/README.md"
