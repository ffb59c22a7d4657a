#!/usr/bin/env bash
# The main job, for now on local Pagefiles: a tour of the API (pf-demo), then
# the workload-replay driver filling a 16 MiB file and replaying a random
# trace over it at concurrency 1 and 12, with the CSV it writes.
set -euo pipefail
build=${1:-build}
home=${PAGEFILE_HOME:-$PWD/pagefile-home}
work="$home/demo"
rm -rf "$work"
mkdir -p "$work"

echo "== pf-demo: the C++ API on a local Pagefile"
"$build/tools/pf-demo" --dir "$work" --pages 512 --concurrency 8

echo
echo "== pf-replay: generate traces (2048 pages of 8 KiB = 16 MiB)"
replay="$build/tools/pf-replay"
"$replay" generate --pattern sequential --file demo.pf --file-pages 2048 --ops 2048 \
  --write-ratio 1 --page-size 8192 > "$work/fill.trace"
"$replay" generate --pattern random --file demo.pf --file-pages 2048 --ops 3000 \
  --write-ratio 0.3 --page-size 8192 --seed 7 > "$work/random.trace"
wc -l "$work/fill.trace" "$work/random.trace"

for c in 1 12; do
  echo
  echo "== pf-replay run at concurrency $c"
  rm -rf "$work/c$c" && mkdir -p "$work/c$c"
  "$replay" run "$work/fill.trace" --dir "$work/c$c" --concurrency "$c" --csv "$work/replay.csv"
  "$replay" run "$work/random.trace" --dir "$work/c$c" --concurrency "$c" --csv "$work/replay.csv"
done

echo
if cmp -s "$work/c1/demo.pf" "$work/c12/demo.pf"; then
  echo "the files replayed at concurrency 1 and 12 are byte-identical"
else
  echo "the files replayed at concurrency 1 and 12 differ" >&2
  exit 1
fi
echo
echo "== $work/replay.csv"
cat "$work/replay.csv"
