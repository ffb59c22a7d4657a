#!/usr/bin/python3
"""The four SQLite workloads of bench/sqlite_vfs.sh, on one database.

    /usr/bin/python3 bench/sqlite_vfs_workload.py --db URI [--extension SO] ...

Run it with Debian's /usr/bin/python3: its sqlite3 module can load
extensions (enable_load_extension); the pyenv Python cannot. --db is a path
(the unix VFS) or a URI such as file:/bench.db?vfs=pagefile&concurrency=12.

The workloads, in this order, each on a fresh connection so SQLite's own page
cache starts empty (it holds cache_size pages, default about 500 of 4 KiB,
well under the database):
  insert   one transaction inserting ROWS rows of one ~3000-byte blob each
           (about one 4 KiB page per row, so ROWS pages)
  reads    READS point reads by random rowid
  scan     a full scan reading every row (the median of --scans scans, each
           on a fresh connection)
  txn      TXNS transactions, each updating TXN_ROWS random rows, so each
           writes about TXN_ROWS random pages (plus their journal), with
           the table read into SQLite's page cache first (untimed, and
           cache_size raised to hold it): what is timed is the writing of
           the transactions, journal and commit, which is what the
           concurrency level can overlap
  txn-cold the same on a fresh connection, so each transaction first reads
           its pages one at a time (SQLite asks for each only when it
           needs it), as an application with a cold cache would
then an untimed PRAGMA integrity_check, which must answer "ok".

Prints one line per workload, "workload seconds operations", and with
--stats the VFS's PRAGMA pagefile_stats rows after the last workload.
Exits non-zero on any SQLite error or a failed integrity check.
"""
import argparse
import random
import sqlite3
import statistics
import time

from pagefile_extension import load_pagefile, run_main

PAD_BYTES = 3000


def connect(args, db_uri=None):
    """A connection to --db (or `db_uri`) with the run's pragmas."""
    uri = db_uri or args.db
    db = sqlite3.connect(uri, uri=uri.startswith("file:"), isolation_level=None)
    db.execute(f"PRAGMA page_size={args.page_size}")
    if args.journal_mode:
        mode = db.execute(f"PRAGMA journal_mode={args.journal_mode}").fetchone()[0]
        if mode != args.journal_mode:
            raise SystemExit(f"journal_mode={args.journal_mode} gave {mode}")
    if args.synchronous:
        db.execute(f"PRAGMA synchronous={args.synchronous}")
    return db


# The workloads, shared with bench/sqlite_paired.py.
def insert(db, rows):
    db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")
    db.execute("BEGIN")
    db.executemany("INSERT INTO t(id, pad) VALUES(?, randomblob(?))",
                   ((i, PAD_BYTES) for i in range(1, rows + 1)))
    db.execute("COMMIT")


def point_reads(db, ids):
    for i in ids:
        row = db.execute("SELECT length(pad) FROM t WHERE id=?", (i,)).fetchone()
        if row is None or row[0] != PAD_BYTES:
            raise SystemExit(f"row {i} missing or wrong: {row}")


def scan(db, rows):
    count, total = db.execute("SELECT count(*), sum(length(pad)) FROM t").fetchone()
    if count != rows or total != rows * PAD_BYTES:
        raise SystemExit(f"scan saw {count} rows, {total} bytes")


def warm(db, rows, page_size):
    """The table read into SQLite's page cache (a scan), made to hold it."""
    # Twice the table's pages, in KiB (a negative cache_size).
    db.execute(f"PRAGMA cache_size=-{2 * rows * page_size // 1024}")
    scan(db, rows)


def transactions(db, batches):
    for batch in batches:
        db.execute("BEGIN")
        db.executemany("UPDATE t SET pad=randomblob(?) WHERE id=?",
                       ((PAD_BYTES, i) for i in batch))
        db.execute("COMMIT")


def check_integrity(db):
    check = db.execute("PRAGMA integrity_check").fetchall()
    if check != [("ok",)]:
        raise SystemExit(f"integrity_check: {check}")


def timed(name, operations, work):
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    print(f"{name} {seconds:.4f} {operations}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="database path or URI")
    parser.add_argument("--extension", help="pagefile.so, loaded before opening --db")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=5000)
    parser.add_argument("--txns", type=int, default=2)
    parser.add_argument("--txn-rows", type=int, default=1000)
    parser.add_argument("--scans", type=int, default=5, help="scans run; the median is reported")
    parser.add_argument("--page-size", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--journal-mode", default="", help="PRAGMA journal_mode for every connection (default: SQLite's, delete)")
    parser.add_argument("--synchronous", default="", help="PRAGMA synchronous for every connection (default: SQLite's, FULL)")
    parser.add_argument("--stats", action="store_true", help="print PRAGMA pagefile_stats at the end")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    load_pagefile(args.extension)

    db = connect(args)
    timed("insert", args.rows, lambda: insert(db, args.rows))
    db.close()

    db = connect(args)
    ids = [rng.randint(1, args.rows) for _ in range(args.reads)]
    timed("reads", args.reads, lambda: point_reads(db, ids))
    db.close()

    # A scan takes milliseconds on a local disk, where one run is mostly
    # noise: the median of --scans, each on a fresh connection.
    times = []
    for _ in range(args.scans):
        db = connect(args)
        start = time.perf_counter()
        scan(db, args.rows)
        times.append(time.perf_counter() - start)
        db.close()
    print(f"scan {statistics.median(times):.4f} {args.rows}", flush=True)

    batches = [rng.sample(range(1, args.rows + 1), min(args.txn_rows, args.rows))
               for _ in range(args.txns)]
    db = connect(args)
    warm(db, args.rows, args.page_size)
    timed("txn", args.txns, lambda: transactions(db, batches))
    db.close()

    db = connect(args)
    timed("txn-cold", args.txns, lambda: transactions(db, batches))
    check_integrity(db)
    if args.stats:
        for row in db.execute("PRAGMA pagefile_stats"):
            print("stats", *row)
    db.close()


if __name__ == "__main__":
    run_main(main, "sqlite_vfs_workload")
