#!/usr/bin/python3
"""PROCS processes share one SQLite database: a counter and a log table.

    /usr/bin/python3 bench/sqlite_processes.py --db URI --procs 4 [--extension SO] ...

Each process runs TXNS write transactions (BEGIN IMMEDIATE, add one to the
counter, insert a ~PAD-byte row, COMMIT) with READS point reads of the log
between two of them, waiting on the others' locks with a busy timeout. The
parent makes the database, every connection in --journal-mode, starts the
processes at once and times them from start to the last one's exit; then
the counter must be PROCS * TXNS and integrity_check ok. Prints "processes-PROCS SECONDS TXNS_ALL".
Run it with Debian's /usr/bin/python3 (its sqlite3 module loads extensions).
"""
import argparse
import os
import random
import sqlite3
import subprocess
import sys
import time

from pagefile_extension import add_sqlite_options, load_pagefile, run_main


def connect(args):
    db = sqlite3.connect(args.db, uri=args.db.startswith("file:"), isolation_level=None, timeout=60)
    if args.synchronous:
        db.execute(f"PRAGMA synchronous={args.synchronous}")
    # WAL is the database's, kept in its file; the rollback journal's modes
    # (TRUNCATE, PERSIST) are each connection's, set on every one.
    mode = db.execute(f"PRAGMA journal_mode={args.journal_mode}").fetchone()[0]
    if mode != args.journal_mode:
        raise SystemExit(f"journal_mode={args.journal_mode} gave {mode}")
    return db


def worker(args):
    load_pagefile(args.extension)
    db = connect(args)
    rng = random.Random(args.seed)
    for _ in range(args.txns):
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE c SET n = n + 1")
        db.execute("INSERT INTO log(pad) VALUES(randomblob(?))", (args.pad,))
        db.execute("COMMIT")
        top = db.execute("SELECT max(id) FROM log").fetchone()[0]
        for _ in range(args.reads):
            if db.execute("SELECT length(pad) FROM log WHERE id=?", (rng.randint(1, top),)).fetchone() is None:
                raise SystemExit("a row of the log is missing")
    db.close()
    # When this process finished, on the clock all processes share (CLOCK_MONOTONIC).
    print(f"finished {time.monotonic():.6f}", flush=True)


def disk_writes(device):
    """(writes completed, sectors written, ms spent writing) of the block
    device so far (Documentation/block/stat.rst), or None without one."""
    if not device:
        return None
    with open(f"/sys/block/{device}/stat") as stat:
        fields = [int(f) for f in stat.read().split()]
    return fields[4], fields[6], fields[7]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    add_sqlite_options(parser)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--txns", type=int, default=200)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--pad", type=int, default=500)
    parser.add_argument("--block-device", metavar="DEV",
                        help="also print the disk's writes, sectors written and milliseconds spent writing "
                             "per commit while the processes ran, from /sys/block/DEV/stat (the whole "
                             "disk's: run nothing else meanwhile)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    if args.block_device and not os.path.exists(f"/sys/block/{args.block_device}/stat"):
        raise SystemExit(f"--block-device: no /sys/block/{args.block_device}/stat (see lsblk)")
    load_pagefile(args.extension)
    db = connect(args)
    db.execute("CREATE TABLE c(n INTEGER)")
    db.execute("INSERT INTO c VALUES(0)")
    db.execute("CREATE TABLE log(id INTEGER PRIMARY KEY, pad BLOB)")
    db.execute("INSERT INTO log(pad) VALUES(randomblob(?))", (args.pad,))
    db.close()

    command = [sys.executable, __file__, "--worker", "--db", args.db, "--txns", str(args.txns),
               "--reads", str(args.reads), "--pad", str(args.pad), "--synchronous", args.synchronous,
               "--journal-mode", args.journal_mode]
    if args.extension:
        command += ["--extension", args.extension]
    # Timed from here to the last worker's own finishing time, not to when
    # this process sees it exit: Popen.wait(timeout) polls, sleeping up to
    # 50 ms between polls, which would round every figure up to 50 ms.
    disk_before = disk_writes(args.block_device)
    start = time.monotonic()
    procs = [subprocess.Popen(command + ["--seed", str(p)], stdout=subprocess.PIPE, text=True)
             for p in range(args.procs)]
    finished = []
    for p in procs:
        out, _ = p.communicate(timeout=max(1.0, 600 - (time.monotonic() - start)))
        finished += [float(line.split()[1]) for line in out.splitlines() if line.startswith("finished ")]
    codes = [p.returncode for p in procs]
    if any(codes) or len(finished) != args.procs:
        raise SystemExit(f"a process failed: exit codes {codes}")
    seconds = max(finished) - start
    disk_after = disk_writes(args.block_device)

    db = connect(args)
    n = db.execute("SELECT n FROM c").fetchone()[0]
    if n != args.procs * args.txns:
        raise SystemExit(f"counter is {n}, not {args.procs * args.txns}: an update was lost")
    check = db.execute("PRAGMA integrity_check").fetchall()
    if check != [("ok",)]:
        raise SystemExit(f"integrity_check: {check}")
    db.close()
    print(f"processes-{args.procs} {seconds:.4f} {n}", flush=True)
    if disk_before:
        writes, sectors, ms = (after - before for after, before in zip(disk_after, disk_before))
        print(f"disk {args.block_device}: {writes / n:.2f} writes, {sectors / n:.1f} sectors, "
              f"{ms / n:.3f} ms writing per commit", flush=True)


if __name__ == "__main__":
    run_main(main, "sqlite_processes")
