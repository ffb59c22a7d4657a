#!/usr/bin/env bash
# The test suite's run of bench/experiments.sh --quick (meson test
# experiments_quick): every experiment at a tiny size against real pagefiled
# processes, then bench/experiments/check_quick.py checks that each CSV, PNG
# and the README is there with the expected shape (not the speed).
#   bench/experiments/quick_test.sh BUILD_DIR
# Exit 0: all there; 77: skipped (no matplotlib: CSVs checked, PNGs not);
# anything else: a failure, with the run's output.
set -euo pipefail
build=${1:?usage: quick_test.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/pf-experiments-quick.XXXXXX")
trap 'rm -rf "$out"' EXIT
bash "$here/../experiments.sh" --quick --out "$out" --build "$build"
/usr/bin/python3 "$here/check_quick.py" "$out"
