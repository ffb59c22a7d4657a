#!/usr/bin/env bash
# Remote Pagefile throughput against concurrency level (Pagefile paper,
# section 5, on one machine): random 8 KiB page reads through pf-replay --bus
# at concurrency 1 to 24, in three parts, side by side in one run:
#
#   latency  6 pagefiled on loopback, each EMULATING a disk of 10 ms per
#            uncached page (--disk-latency 10) behind a 256-page cache; a
#            30000-page file striped over them (far larger than the caches),
#            random reads. The ideal is one page per server per 10 ms:
#            min(c, 6) x 100 pages/s, at most 600 pages/s.
#   cached   the same 6 servers restarted with no emulated latency and a cache
#            larger than the file, warmed by one read pass: every read is a
#            server cache hit, so this measures the pipeline itself (client,
#            bus, transport, server), not a disk.
#   nbd      a real peer: ONE pagefiled with every page cached against ONE
#            nbdkit memory server (both on Unix sockets), reading the same
#            pages of the same trace at the same concurrency levels; nbd
#            reads go through libnbd's asynchronous API (nbd_random_read),
#            keeping N in flight on one connection. Skipped, with a message,
#            when nbdkit or the nbd_random_read driver (libnbd) is missing.
#   tls      what TLS costs: the cached part on two clusters side by side,
#            one on tcp:// and one on tls:// (TLS 1.3, a pre-shared key made
#            by `pagefile keygen`), runs alternating between them. Not in
#            the default parts: --parts tls.
#
# A benchmark, not a test: it asserts nothing about speed, and builds nothing.
# Every pf-replay run verifies every page it reads; any error or mismatch
# stops the benchmark. See bench/README.md.
#
# usage: bench/remote_concurrency.sh [--pf-replay PATH] [--pagefiled PATH]
#            [--nbd-driver PATH] [--parts "latency cached nbd tls"]
#            [--levels "1 2 4 6 8 12 16 24"] [--servers 6] [--latency-ms 10]
#            [--cache-pages 256] [--file-pages 30000] [--page-size 8192]
#            [--seconds 3] [--repeat 3] [--csv OUT] [--tmp DIR]
set -euo pipefail

source "$(dirname "$0")/lib.sh"
parse_options pf_replay="$here/../build/tools/pf-replay" pagefiled="$here/../build/tools/pagefiled" \
  nbd_driver="$here/../build/bench/nbd_random_read" parts="latency cached nbd" \
  levels="1 2 4 6 8 12 16 24" servers=6 latency_ms=10 cache_pages=256 file_pages=30000 \
  page_size=8192 seconds=3 repeat=3 csv="$PWD/remote_concurrency.csv" tmp="${TMPDIR:-/tmp}" -- "$@"

need_tools pf_replay pagefiled
csv=$(rooted "$csv")
for part in $parts; do
  case "$part" in latency|cached|nbd|tls) ;; *) die "--parts: unknown part '$part'" ;; esac
done
want() { [[ " $parts " == *" $1 "* ]]; }

# Whether the NBD part can run, and if not why not.
nbd_missing=""
if want nbd; then
  if [[ ! -x "$nbd_driver" ]]; then
    nbd_missing="the nbd_random_read driver was not built${nbd_driver:+ at $nbd_driver} (it needs libnbd: Debian package libnbd-dev, then meson setup --reconfigure)"
  elif ! command -v nbdkit > /dev/null; then
    nbd_missing="nbdkit is not installed (Debian package nbdkit)"
  elif ! nbdkit memory --dump-plugin > /dev/null 2>&1; then
    nbd_missing="nbdkit has no memory plugin (Debian package nbdkit)"
  else
    nbd_driver=$(absolute "$nbd_driver")
  fi
fi

# cluster_pids (lib.sh): every server this script started, nbdkit too.
make_work pf-bench-remote
cd "$work"

# cluster PREFIX N ARGS...: N servers on 127.0.0.1 over fresh directories
# $work/PREFIX/server-I; sets bus to their addresses, comma-separated.
cluster() { start_cluster "$pagefiled" "$work/$1" "${@:2}" || exit 1; }

# The sum of the servers' cache hits and misses ("HITS MISSES").
cache_counters() {
  if [[ $have_admin == 0 ]]; then echo "0 0"; return; fi
  { "$pf_admin_bus_tool" status --bus "$1" 2> /dev/null || true; } |
    awk '$1 ~ /^(tcp:|tls:|unix:)/ && $2 != "DOWN:" { h += $5; m += $6 } END { print h + 0, m + 0 }'
}
pf_admin_bus_tool="$(dirname "$pf_replay")/pagefile"
have_admin=1
[[ -x "$pf_admin_bus_tool" ]] || have_admin=0
# misses BEFORE AFTER FORMAT: the share of the servers' reads that missed
# their caches between two cache_counters, in percent with FORMAT ("?" when
# there is no counting them).
misses() {
  local h0 m0 h1 m1
  read -r h0 m0 <<< "$1"
  read -r h1 m1 <<< "$2"
  awk -v h=$((h1 - h0)) -v m=$((m1 - m0)) -v a="$have_admin" -v format="$3" \
    'BEGIN { if (a == 0 || h + m == 0) print "?"; else printf format, 100 * m / (h + m) }'
}

# CPU time (user + system, seconds) of a command run with `time`, and of
# running processes (from /proc, in clock ticks): on a machine shared with
# other work the CPU a page costs is steadier than the pages per second.
TIMEFORMAT='%U %S'
clock_ticks=$(getconf CLK_TCK 2> /dev/null || echo 100)
cpu_of() {  # PID...: their CPU seconds so far, summed
  local pid
  for pid in "$@"; do cat "/proc/$pid/stat" 2> /dev/null || echo "x x x x x x x x x x x x x 0 0"; done |
    awk -v t="$clock_ticks" '{ s += $14 + $15 } END { printf "%.3f\n", s / t }'
}
# per_page SECONDS PAGES: microseconds per page.
per_page() { awk -v c="$1" -v p="$2" 'BEGIN { printf "%.1f\n", (p > 0) ? 1e6 * c / p : 0 }'; }

# replay TRACE BUS LEVEL [ARGS...]: one verified pf-replay run; prints its
# CSV row (also appended to runs.csv) and leaves pf-replay's own CPU seconds
# in client.cpu.
replay() {
  local trace=$1 bus_arg=$2 level=$3
  shift 3
  { time "$pf_replay" run "$trace" --bus "$bus_arg" --concurrency "$level" --csv runs.csv \
      --no-progress "$@" > run.out 2> run.err; } 2> time.out ||
    fail "pf-replay failed on $trace at concurrency $level" run.out run.err
  awk '{ print $1 + $2 }' time.out > client.cpu
  tail -1 runs.csv
}
# Columns of pf-replay's CSV, found by name so added columns do not shift them.
field() { echo "$1" | cut -d, -f"$(column_of "$2" runs.csv)"; }
# measured_replay TRACE BUS LEVEL PID...: one replay; its pages/s, ms/page and
# CPU microseconds per page (pf-replay's and the PIDs' during the run)
# appended to rates, mss and cpus.
measured_replay() {
  local trace=$1 bus_arg=$2 level=$3 before after row
  shift 3
  before=$(cpu_of "$@")
  row=$(replay "$trace" "$bus_arg" "$level")
  after=$(cpu_of "$@")
  rates+=("$(field "$row" pages_per_s)")
  mss+=("$(field "$row" ms_per_page)")
  cpus+=("$(per_page "$(awk -v a="$after" -v b="$before" -v c="$(cat client.cpu)" \
    'BEGIN { print a - b + c }')" "$(field "$row" pages)")")
}
median_of() { printf "%s\n" "$@" | median; }

gen() { "$pf_replay" generate --file data --file-pages "$file_pages" --page-size "$page_size" "$@"; }
gen --pattern sequential --ops "$file_pages" --write-ratio 1 > fill.trace
gen --pattern sequential --ops "$file_pages" --write-ratio 0 > warm.trace
# random_trace NAME OPS SEED: random reads only (write ratio 0). Each level
# gets a seed of its own: with one seed for all, a run's pages would be the
# previous run's pages again (the generator's first draws are the same), and
# found in the servers' caches.
random_trace() { gen --pattern random --ops "$2" --write-ratio 0 --seed "$3" > "$1"; }

# ops_for_rate RATE [MIN]: ops for a run of about `seconds` at RATE pages/s:
# ceil(RATE x seconds), at least MIN (default 1000).
ops_for_rate() {
  awk -v r="$1" -v s="$seconds" -v min="${2:-1000}" 'BEGIN { n = int(r * s + 0.999); print (n < min) ? min : n }'
}

echo "command: $command_line"
echo "pf-replay: $pf_replay"
echo "pagefiled: $pagefiled"
echo "machine: $(uname -srm), $(nproc) CPUs; server data in $work ($(stat -f -c %T "$work") file system)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
# Other work on the machine shows in every figure; say how much there was.
load() { [[ -r /proc/loadavg ]] && cut -d' ' -f1-3 /proc/loadavg || echo "unknown"; }
echo "load average (1, 5, 15 min) at start: $(load)"
echo "file: $file_pages pages of $page_size B ($((file_pages * page_size / 1024 / 1024)) MiB), random reads (write ratio 0, a seed per level)"
echo "each run: pf-replay run TRACE --bus BUS --concurrency N --csv runs.csv --no-progress"
echo "          (every page read is verified; the timed run includes connecting and the open)"
echo

fill_and_warm() {  # BUS [PLACEMENT ARGS...]
  local bus_arg=$1
  shift
  # --policy random: the traces are sequential, and a file declared
  # sequential is not kept in the servers' pools (pages are tossed once
  # passed); every run here reads the file as random.
  replay fill.trace "$bus_arg" 24 --policy random "$@" > /dev/null
}

# ---------------------------------------------------------------------------
if want latency; then
  ideal_max=$((servers * 1000 / latency_ms))
  echo "== latency: $servers pagefiled, EMULATED disk latency $latency_ms ms, cache $cache_pages pages each =="
  echo "servers: pagefiled --listen tcp://127.0.0.1:0 --disk-latency $latency_ms --cache-pages $cache_pages (x$servers)"
  # Filled without the emulated latency (it would take file_pages / 600 s),
  # then restarted with it: the caches start empty.
  cluster lat "$servers" --cache-pages "$cache_pages"
  echo "bus: $bus"
  fill_and_warm "$bus" --placement stripe
  restart_cluster "$pagefiled" "$work/lat" --disk-latency "$latency_ms" --cache-pages "$cache_pages"
  echo "file created with --placement stripe (1 page per unit) and filled (untimed, before the servers"
  echo "were restarted with the emulated latency and empty caches)"
  echo "ideal: one uncached page per server per $latency_ms ms = min(c, $servers) x $((1000 / latency_ms)) pages/s, at most $ideal_max pages/s"
  # The caches hold servers x cache_pages of the file's pages; a random read
  # finds its page there with about that share, and a hit waits for no disk.
  miss_share=$(awk -v c=$((servers * cache_pages)) -v f="$file_pages" 'BEGIN { h = c / f; if (h > 1) h = 1; print 1 - h }')
  echo "the caches hold $((servers * cache_pages)) of the $file_pages pages, so about $(awk -v m="$miss_share" 'BEGIN { printf "%.0f", 100 * (1 - m) }')% of random reads are hits, which wait for no disk:"
  echo "a level can beat its ideal by up to 1 / (share of misses); the misses column is the servers' own count"
  echo "(one run per level, ops sized for ~${seconds} s at the ideal rate with that share of misses)"
  echo "schedule trace: reads issued in the trace's order, oldest confirmed first (the paper's experiment);"
  echo "schedule balanced: pf-replay --schedule balanced, each read chosen among the next 8c of the trace"
  echo "so that the servers are evenly busy (Client::server_of), still oldest confirmed first"
  printf "%-26s %8s %5s %6s %8s %9s %9s %8s %9s %7s %7s\n" "EMULATED ${latency_ms} ms disk" schedule concurrency \
    ops seconds ms/page pages/s ideal "%ideal(c)" "%$ideal_max" misses
  for level in $levels; do
    busy=$((level < servers ? level : servers))
    ideal=$((busy * 1000 / latency_ms))
    ops=$(ops_for_rate "$(awk -v i="$ideal" -v m="$miss_share" 'BEGIN { print (m > 0) ? i / m : i }')" 100)
    for schedule in trace balanced; do
      seed=$level
      [[ $schedule == balanced ]] && seed=$((level + 1000))
      random_trace "emulated${latency_ms}ms-read-c$level-$schedule.trace" "$ops" "$seed"
      before=$(cache_counters "$bus")
      row=$(replay "emulated${latency_ms}ms-read-c$level-$schedule.trace" "$bus" "$level" --schedule "$schedule")
      after=$(cache_counters "$bus")
      rate=$(field "$row" pages_per_s)
      miss=$(misses "$before" "$after" "%.0f%%")
      printf "%-26s %8s %5s %6s %8.2f %9.3f %9.1f %8d %8.1f%% %6.1f%% %7s\n" \
        "EMULATED ${latency_ms} ms disk" "$schedule" "$level" "$ops" "$(field "$row" seconds)" \
        "$(field "$row" ms_per_page)" "$rate" "$ideal" \
        "$(awk -v r="$rate" -v i="$ideal" 'BEGIN { print 100 * r / i }')" \
        "$(awk -v r="$rate" -v i="$ideal_max" 'BEGIN { print 100 * r / i }')" "$miss"
    done
  done
  stop_cluster
  echo
fi

# ---------------------------------------------------------------------------
# sized_trace PREFIX BUS LEVEL SEED: sets `trace` to PREFIX-read-cLEVEL.trace,
# `ops` random reads for a run of ~seconds at LEVEL as a 2000-op probe run
# (PREFIX-probe.trace) finds; both traces have seed SEED.
sized_trace() {
  local row
  random_trace "$1-probe.trace" 2000 "$4"
  row=$(replay "$1-probe.trace" "$2" "$3")
  ops=$(ops_for_rate "$(field "$row" pages_per_s)")
  trace="$1-read-c$3.trace"
  random_trace "$trace" "$ops" "$4"
}

if want cached; then
  big_cache=$((file_pages * 2))
  echo "== cached: $servers pagefiled, NO emulated latency, cache $big_cache pages each (> the file): every read a cache hit =="
  echo "servers: pagefiled --listen tcp://127.0.0.1:0 --cache-pages $big_cache (x$servers)"
  cluster hit "$servers" --cache-pages "$big_cache"
  echo "bus: $bus"
  fill_and_warm "$bus" --placement stripe
  replay warm.trace "$bus" 24 --policy random > /dev/null
  echo "file created with --placement stripe, filled, then warmed by one sequential read pass (untimed)"
  echo "(ops sized from a 2000-op probe for ~${seconds} s; median of $repeat runs)"
  echo "(cpu = CPU time of pf-replay and the $servers servers during the run, per page read)"
  printf "%-32s %5s %7s %9s %10s %8s %9s %7s\n" "no emulated latency" concurrency ops ms/page pages/s "vs c=1" \
    "cpu us/p" misses
  base=""
  for level in $levels; do
    sized_trace cached "$bus" "$level" $((100 + level))
    before=$(cache_counters "$bus")
    rates=(); mss=(); cpus=()
    for ((r = 0; r < repeat; r++)); do measured_replay "$trace" "$bus" "$level" "${cluster_pids[@]}"; done
    rate=$(median_of "${rates[@]}")
    miss=$(misses "$before" "$(cache_counters "$bus")" "%.1f%%")
    [[ -z "$base" ]] && base=$rate
    printf "%-32s %5s %7s %9.4f %10.0f %7.2fx %9.1f %7s\n" "no emulated latency (all hits)" "$level" "$ops" \
      "$(median_of "${mss[@]}")" "$rate" "$(awk -v r="$rate" -v b="$base" 'BEGIN { print r / b }')" \
      "$(median_of "${cpus[@]}")" "$miss"
  done
  stop_cluster
  echo
fi

# ---------------------------------------------------------------------------
if want nbd; then
  echo "== nbd: ONE pagefiled (all pages cached) against ONE nbdkit memory server, NO emulated latency =="
  if [[ -n "$nbd_missing" ]]; then
    echo "SKIPPED: $nbd_missing"
  else
    big_cache=$((file_pages * 2))
    pf_socket="$work/pf.sock"
    nbd_socket="$work/nbd.sock"
    start_pagefiled "$pagefiled" "$work/peer" "unix:$pf_socket" --cache-pages "$big_cache" || exit 1
    peer_bus=$address
    pf_pid=${cluster_pids[-1]}
    # --exit-with-parent implies --foreground; the pid file appears once it
    # accepts connections.
    nbdkit --unix "$nbd_socket" --pidfile "$work/nbdkit.pid" --exit-with-parent \
      memory "$((file_pages * page_size))" > "$work/nbdkit.out" 2>&1 &
    cluster_pids+=($!)
    nbd_pid=$!
    for ((i = 0; i < 100; i++)); do [[ -s "$work/nbdkit.pid" ]] && break; sleep 0.1; done
    [[ -s "$work/nbdkit.pid" ]] || fail "nbdkit did not start within 10 s" "$work/nbdkit.out"
    echo "pagefile: pagefiled --listen unix:$pf_socket --cache-pages $big_cache; file filled and warmed by one read pass"
    echo "nbd:      nbdkit --unix $nbd_socket memory $((file_pages * page_size)) ($(nbdkit --version | head -1)); disk filled once"
    echo "          $nbd_driver --unix SOCKET --page-size $page_size --trace TRACE --concurrency N --stamp data"
    echo "both read the pages of the same trace and check each page's stamp as pf-replay does (its checksum, file and page)"
    echo "(ops sized from a 2000-op probe of pagefile for ~${seconds} s; median of $repeat runs each, alternating)"
    echo "(cpu = CPU time of client and server during the run, per page: pf-replay + pagefiled, nbd_random_read + nbdkit)"
    fill_and_warm "$peer_bus"
    replay warm.trace "$peer_bus" 24 --policy random > /dev/null
    "$nbd_driver" --unix "$nbd_socket" --page-size "$page_size" --pages "$file_pages" \
      --ops 0 --concurrency 24 --fill --stamp data > nbd.out 2>&1 || fail "filling the nbd disk failed" nbd.out
    nbd_csv="${csv%.csv}-nbd.csv"
    [[ -s "$nbd_csv" ]] || echo "started_utc,concurrency,ops,seconds,ms_per_page,pages_per_s,page_size,cpu_us_per_page,trace" > "$nbd_csv"
    printf "%-30s %5s %7s %9s %9s %7s %9s %9s %8s %8s\n" "no emulated latency, 1 server" concurrency ops \
      "pf p/s" "nbd p/s" "pf/nbd" "pf ms/p" "nbd ms/p" "pf cpu" "nbd cpu"
    for level in $levels; do
      sized_trace nbdpeer "$peer_bus" "$level" $((200 + level))
      rates=(); mss=(); cpus=(); nbd_rates=(); nbd_mss=(); nbd_cpus=()
      for ((r = 0; r < repeat; r++)); do
        for side in $(turns "$r" pf nbd); do
          if [ "$side" = pf ]; then
            measured_replay "$trace" "$peer_bus" "$level" "$pf_pid"
            continue
          fi
          server_before=$(cpu_of "$nbd_pid")
          { time "$nbd_driver" --unix "$nbd_socket" --page-size "$page_size" --trace "$trace" \
              --concurrency "$level" --stamp data > nbd.out 2>&1; } 2> time.out ||
            fail "nbd_random_read failed at concurrency $level" nbd.out
          server_after=$(cpu_of "$nbd_pid")
          line=$(cat nbd.out)
          value() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
          nbd_rates+=("$(value pages_per_s)")
          nbd_mss+=("$(value ms_per_page)")
          nbd_cpu=$(per_page "$(awk -v a="$server_after" -v b="$server_before" '{ print a - b + $1 + $2 }' time.out)" "$ops")
          nbd_cpus+=("$nbd_cpu")
          echo "$(date -u +%Y-%m-%dT%H:%M:%SZ),$level,$(value ops),$(value seconds),$(value ms_per_page),$(value pages_per_s),$page_size,$nbd_cpu,$trace" >> "$nbd_csv"
        done
      done
      pf_rate=$(median_of "${rates[@]}")
      nbd_rate=$(median_of "${nbd_rates[@]}")
      printf "%-30s %5s %7s %9.0f %9.0f %6.2fx %9.4f %9.4f %8.1f %8.1f\n" "no emulated latency, 1 server" \
        "$level" "$ops" "$pf_rate" "$nbd_rate" "$(awk -v a="$pf_rate" -v b="$nbd_rate" 'BEGIN { print a / b }')" \
        "$(median_of "${mss[@]}")" "$(median_of "${nbd_mss[@]}")" \
        "$(median_of "${cpus[@]}")" "$(median_of "${nbd_cpus[@]}")"
    done
    echo "(pf/nbd: pages per second of pagefile over nbdkit; cpu: microseconds of CPU per page read)"
    echo "nbd rows appended to $nbd_csv"
  fi
  stop_cluster
  echo
fi

# ---------------------------------------------------------------------------
if want tls; then
  big_cache=$((file_pages * 2))
  echo "== tls: the cached part over tcp:// and over tls:// side by side, NO emulated latency, every read a cache hit =="
  "$pf_admin_bus_tool" keygen "$work/key" > /dev/null || die "pagefile keygen failed (is $pf_admin_bus_tool built?)"
  cluster tcp "$servers" --cache-pages "$big_cache"
  tcp_bus=$bus
  cluster_listen=tls://127.0.0.1:0 cluster tls "$servers" --cache-pages "$big_cache" --psk-file "$work/key"
  tls_bus="$bus,psk_file=$work/key"
  echo "servers: pagefiled --listen tcp://127.0.0.1:0 --cache-pages $big_cache (x$servers), and the same on"
  echo "         tls://127.0.0.1:0 with --psk-file KEY (x$servers); clients: --bus ...,psk_file=KEY"
  for b in "$tcp_bus" "$tls_bus"; do
    fill_and_warm "$b" --placement stripe
    replay warm.trace "$b" 24 --policy random > /dev/null
  done
  echo "each file created with --placement stripe, filled, then warmed by one sequential read pass (untimed)"
  echo "(ops sized from a 2000-op probe over tcp for ~${seconds} s; median of $repeat runs each, alternating)"
  echo "(cpu = CPU time of pf-replay and every server during the run, per page read: the idle cluster's too)"
  printf "%-22s %5s %7s %10s %10s %8s %9s %9s
" "8 KiB reads, all hits" concurrency ops "tcp p/s" "tls p/s"     "tls/tcp" "tcp cpu" "tls cpu"
  for level in $levels; do
    sized_trace tls "$tcp_bus" "$level" $((200 + level))
    rates=(); mss=(); cpus=()
    tcp_rates=(); tls_rates=(); tcp_cpus=(); tls_cpus=()
    for ((r = 0; r < repeat; r++)); do
      measured_replay "$trace" "$tcp_bus" "$level" "${cluster_pids[@]}"
      tcp_rates+=("${rates[-1]}"); tcp_cpus+=("${cpus[-1]}")
      measured_replay "$trace" "$tls_bus" "$level" "${cluster_pids[@]}"
      tls_rates+=("${rates[-1]}"); tls_cpus+=("${cpus[-1]}")
    done
    tcp_rate=$(median_of "${tcp_rates[@]}")
    tls_rate=$(median_of "${tls_rates[@]}")
    printf "%-22s %5s %7s %10.0f %10.0f %7.2fx %9.1f %9.1f\n" "no emulated latency" "$level" "$ops" "$tcp_rate" \
      "$tls_rate" "$(awk -v a="$tls_rate" -v b="$tcp_rate" 'BEGIN { print a / b }')" \
      "$(median_of "${tcp_cpus[@]}")" "$(median_of "${tls_cpus[@]}")"
  done
  echo "(tls/tcp: pages per second over tls:// as a share of tcp://, medians of runs alternating in one run)"
  stop_cluster
  echo
fi

echo "load average (1, 5, 15 min) at the end: $(load)"

# The pf-replay rows of this run go to OUT, with pf-replay's header when OUT is new.
if [[ -s runs.csv ]] && append_csv runs.csv "$csv"; then
  echo "pf-replay rows (probes and warm-ups included; the trace column names the part) appended to $csv"
fi
exit 0
