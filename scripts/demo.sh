#!/usr/bin/env bash
# The main job. SQLite first: the sqlite3 shell with the pagefile VFS on the
# embedded default (scripts/demo_sqlite.sh), then on six pagefiled with an
# emulated 10 ms disk at concurrency 1 and 12 (scripts/demo_latency.sh). Local Pagefiles: a tour of the API (pf-demo), then the
# workload-replay driver filling a 16 MiB file and replaying a random trace
# over it at concurrency 1 and 12. Remote Pagefiles: the same traces on the
# embedded default (4 in-process page servers), then on 3 pagefiled processes
# on loopback, striped and hashed, with the admin CLI's view of the cluster.
set -euo pipefail
build=${1:-build}
home=${PAGEFILE_HOME:-$PWD/pagefile-home}
work="$home/demo"
rm -rf "$work"
mkdir -p "$work"
export PAGEFILE_HOME="$work/embedded"
replay="$build/tools/pf-replay"
admin="$build/tools/pagefile"

bash "$(dirname "$0")/demo_sqlite.sh" "$build" "$work/sqlite"

echo
echo "== why concurrency matters: SQLite on pagefiled processes with an emulated 10 ms disk"
bash "$(dirname "$0")/demo_latency.sh" "$build" "$work/latency"

echo
echo "== pf-demo: the C++ API on a local Pagefile"
"$build/tools/pf-demo" --dir "$work/api" --pages 512 --concurrency 8

echo
echo "== pf-replay: generate traces (2048 pages of 8 KiB = 16 MiB)"
"$replay" generate --pattern sequential --file demo.pf --file-pages 2048 --ops 2048 \
  --write-ratio 1 --page-size 8192 > "$work/fill.trace"
"$replay" generate --pattern random --file demo.pf --file-pages 2048 --ops 3000 \
  --write-ratio 0.3 --page-size 8192 --seed 7 > "$work/random.trace"
wc -l "$work/fill.trace" "$work/random.trace"

for c in 1 12; do
  echo
  echo "== local, concurrency $c"
  mkdir -p "$work/c$c"
  "$replay" run "$work/fill.trace" --dir "$work/c$c" --concurrency "$c" --version-base 1 --csv "$work/replay.csv"
  "$replay" run "$work/random.trace" --dir "$work/c$c" --concurrency "$c" --version-base 1 --csv "$work/replay.csv"
done
# The 4096-byte header holds the creation time; the pages must be identical.
if cmp -s -i 4096 "$work/c1/demo.pf" "$work/c12/demo.pf"; then
  echo "the pages replayed at concurrency 1 and 12 are byte-identical"
else
  echo "the pages replayed at concurrency 1 and 12 differ" >&2
  exit 1
fi

echo
echo "== remote, the embedded default: 4 page servers in this process (data under $PAGEFILE_HOME)"
"$replay" run "$work/fill.trace" --bus inproc:4 --concurrency 12 --csv "$work/replay.csv"
"$replay" run "$work/random.trace" --bus inproc:4 --concurrency 12 --csv "$work/replay.csv"

echo
echo "== remote, 3 pagefiled processes on loopback"
pids=()
bus=""
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for i in 0 1 2; do
  mkdir -p "$work/server$i"
  "$build/tools/pagefiled" --listen tcp://127.0.0.1:0 --dir "$work/server$i" > "$work/server$i.log" &
  pids+=($!)
  for _ in $(seq 100); do grep -q 'listening on' "$work/server$i.log" && break; sleep 0.05; done
  address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/server$i.log")
  [ -n "$address" ] || { echo "pagefiled $i did not start" >&2; cat "$work/server$i.log" >&2; exit 1; }
  bus="${bus:+$bus,}$address"
done
echo "bus: $bus"
for placement in stripe hash; do
  sed "s/demo\.pf/$placement.pf/" "$work/fill.trace" > "$work/fill-$placement.trace"
  sed "s/demo\.pf/$placement.pf/" "$work/random.trace" > "$work/random-$placement.trace"
  for c in 1 12; do
    "$replay" run "$work/fill-$placement.trace" --bus "$bus" --placement "$placement" --concurrency "$c" --csv "$work/replay.csv"
    "$replay" run "$work/random-$placement.trace" --bus "$bus" --placement "$placement" --concurrency "$c" --csv "$work/replay.csv"
  done
done
echo
"$admin" ls --bus "$bus"
"$admin" stat hash.pf --bus "$bus"
"$admin" status --bus "$bus"
for p in "${pids[@]}"; do kill -TERM "$p"; wait "$p" || true; done
pids=()

echo
echo "== $work/replay.csv"
column -s, -t < "$work/replay.csv" 2>/dev/null | cut -c1-150 || cat "$work/replay.csv"
