#!/usr/bin/python3
"""The one-process SQLite workloads, unix and the pagefile default taking turns in one process.

    /usr/bin/python3 bench/sqlite_paired.py --extension SO --dir DIR [--rounds 60] [--journal-mode delete] ...

bench/sqlite_default.sh runs each VFS's workloads in a process of its own,
one after the other: two figures of a pair lie seconds apart, and on a
shared machine the same 20 ms of work took 15 ms in one second and 24 in
the next. Nine such pairs left each ratio uncertain by about a tenth. Here
one process holds a database of each (DIR/baseline.db through unix, DIR/default.db
through vfs=pagefile, no bus), and each round runs every workload of
bench/sqlite_vfs_workload.py once on each, the two back to back, each first
in every other round. With --baseline-params P the baseline is the default
too, with the URI parameters P (checksums=off: what checksums cost, issue
15), in place of unix:

  insert    a fresh database: one transaction of ROWS rows of ~3000 bytes
  reads     READS point reads by random rowid, on a fresh connection
  scan      a full scan, on a fresh connection
  txn       one transaction updating TXN_ROWS random rows, the table in
            SQLite's page cache first (untimed)
  txn-cold  the same on a fresh connection
then an untimed PRAGMA integrity_check, which must answer "ok".

Prints, per workload: each VFS's median, the ratio of the medians, the
median of the rounds' own ratios (paired) and a 95% interval of that median
(bootstrap, 2000 resamples, fixed seed). With --csv, every figure of every
round. Exits non-zero on any SQLite error or a failed check.
"""
import argparse
import os
import random
import statistics
import time

from pagefile_extension import add_sqlite_options, load_pagefile, run_main
import sqlite_vfs_workload as workload

WORKLOADS = ("insert", "reads", "scan", "txn", "txn-cold")
CONFIGS = ("baseline", "default")


def interval(ratios, rng, resamples=2000):
    """A 95% bootstrap interval of the median of `ratios`."""
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def remove_database(path):
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)


def run_round(args, uri, path, rng_round):
    """One round's figures on one VFS: {workload: seconds}."""
    remove_database(path)
    ids = [rng_round.randint(1, args.rows) for _ in range(args.reads)]
    batch = [rng_round.sample(range(1, args.rows + 1), min(args.txn_rows, args.rows))]
    seconds = {}

    def timed(name, db, work):
        start = time.perf_counter()
        work()
        seconds[name] = time.perf_counter() - start
        db.close()

    db = workload.connect(args, uri)
    timed("insert", db, lambda: workload.insert(db, args.rows))
    db = workload.connect(args, uri)
    timed("reads", db, lambda: workload.point_reads(db, ids))
    db = workload.connect(args, uri)
    timed("scan", db, lambda: workload.scan(db, args.rows))
    db = workload.connect(args, uri)
    workload.warm(db, args.rows, args.page_size)
    timed("txn", db, lambda: workload.transactions(db, batch))
    db = workload.connect(args, uri)
    timed("txn-cold", db, lambda: workload.transactions(db, batch))
    db = workload.connect(args, uri)
    workload.check_integrity(db)
    db.close()
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sqlite_options(parser, extension_required=True)
    parser.add_argument("--dir", required=True, help="an existing folder for the two databases")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--txn-rows", type=int, default=1000)
    parser.add_argument("--page-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline-params", default="",
                        help="URI parameters of a default baseline (e.g. checksums=off); none: unix")
    parser.add_argument("--csv", help="append 'mode,round,config,workload,seconds' rows here")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"--rounds {args.rounds}: at least one round")
    if not os.path.isdir(args.dir):
        raise SystemExit(f"--dir {args.dir}: not a folder")
    # The default as an application finds it, with no bus (PAGEFILE_BUS
    # would send it to a cluster; sqlite_default.sh unsets it too).
    os.environ.pop("PAGEFILE_BUS", None)
    load_pagefile(args.extension)
    paths = {c: os.path.join(os.path.abspath(args.dir), f"{c}.db") for c in CONFIGS}
    uris = {"baseline": paths["baseline"], "default": f"file:{paths['default']}?vfs=pagefile"}
    if args.baseline_params:
        uris["baseline"] = f"file:{paths['baseline']}?vfs=pagefile&{args.baseline_params}"
    baseline = args.baseline_params or "unix"
    figures = {c: {w: [] for w in WORKLOADS} for c in CONFIGS}
    for r in range(args.rounds):
        # The same rows read and updated on both, new ones each round.
        for config in (CONFIGS if r % 2 == 0 else tuple(reversed(CONFIGS))):
            rng_round = random.Random(args.seed * 1_000_003 + r)
            got = run_round(args, uris[config], paths[config], rng_round)
            for w in WORKLOADS:
                figures[config][w].append(got[w])
    for path in paths.values():
        remove_database(path)

    if args.csv:
        with open(args.csv, "a") as out:
            for config in CONFIGS:
                for w in WORKLOADS:
                    for r, s in enumerate(figures[config][w]):
                        name = baseline if config == "baseline" else config
                        out.write(f"{args.journal_mode},{r},{name},{w},{s:.6f}\n")
    rng = random.Random(args.seed)
    print(f"{args.journal_mode}: {args.rounds} rounds, {baseline} and default in turn in one process")
    print(f"{'workload':10} {'base ms':>9} {'default ms':>11} {'ratio':>7} {'paired':>7}  95% interval")
    for w in WORKLOADS:
        base, default = figures["baseline"][w], figures["default"][w]
        ratios = [d / b for d, b in zip(default, base) if b > 0]
        low, high = interval(ratios, rng)
        print(f"{w:10} {statistics.median(base) * 1e3:9.2f} {statistics.median(default) * 1e3:11.2f} "
              f"{statistics.median(default) / statistics.median(base):6.3f}x {statistics.median(ratios):6.3f}x"
              f"  {low:.3f} to {high:.3f}", flush=True)


if __name__ == "__main__":
    run_main(main, "sqlite_paired")
