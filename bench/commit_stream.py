#!/usr/bin/python3
"""A stream of small SQLite transactions, each timed: what a catalog costs a
commit, and how long a commit waits when something dies under it.

    /usr/bin/python3 bench/commit_stream.py --db URI --extension SO --seconds S
        [--kill-pid PID --kill-at T]

Each transaction inserts one row of 600 bytes and adds one to a counter
(BEGIN ... COMMIT in rollback-journal mode: every commit takes and lets go
of the database's locks at the catalog, and syncs at the page servers).
With --kill-pid, that process gets SIGKILL T seconds into the stream.

Prints one line of "name value" pairs: commits, failed, seconds,
commits_per_s, p50_ms, p99_ms, max_ms, and with a kill, max_after_kill_ms
(the slowest commit that was running at the kill or began after it: the
pause the death caused). Checks at the end that the rows are the commits
that succeeded; exits non-zero if not.
"""
import argparse
import os
import signal
import sqlite3
import statistics
import sys
import time

from pagefile_extension import load_pagefile


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--extension", required=True)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--kill-pid", type=int, default=0)
    p.add_argument("--kill-at", type=float, default=0)
    a = p.parse_args()

    load_pagefile(a.extension)
    db = sqlite3.connect(a.db, uri=True, isolation_level=None, timeout=10)
    db.execute("PRAGMA journal_mode=delete")
    db.execute("CREATE TABLE IF NOT EXISTS log(id INTEGER PRIMARY KEY, body TEXT)")
    db.execute("CREATE TABLE IF NOT EXISTS counter(n)")
    if db.execute("SELECT count(*) FROM counter").fetchone()[0] == 0:
        db.execute("INSERT INTO counter VALUES (0)")
    committed = db.execute("SELECT count(*) FROM log").fetchone()[0]
    start_rows = committed

    latencies, failed = [], 0
    killed_at = None
    after_kill = []
    start = time.monotonic()
    while time.monotonic() - start < a.seconds:
        began = time.monotonic()
        if a.kill_pid and killed_at is None and began - start >= a.kill_at:
            os.kill(a.kill_pid, signal.SIGKILL)
            killed_at = time.monotonic()
        try:
            db.execute("BEGIN")
            db.execute("INSERT INTO log VALUES (?, printf('%.600c', 'x'))", (committed + 1,))
            db.execute("UPDATE counter SET n = n + 1")
            db.execute("COMMIT")
            committed += 1
        except sqlite3.Error as e:
            failed += 1
            print(f"commit failed: {e}", file=sys.stderr)
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        ended = time.monotonic()
        latencies.append(ended - began)
        if killed_at is not None and ended >= killed_at:
            after_kill.append(ended - began)
    took = time.monotonic() - start

    rows, n = db.execute("SELECT count(*), (SELECT n FROM counter) FROM log").fetchone()
    if rows != committed or n != committed:
        print(f"rows {rows}, counter {n}, commits {committed}: a commit was half done", file=sys.stderr)
        return 1
    if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        print("integrity_check failed", file=sys.stderr)
        return 1
    ms = sorted(x * 1000 for x in latencies)
    out = {
        "commits": committed - start_rows,
        "failed": failed,
        "seconds": f"{took:.2f}",
        "commits_per_s": f"{(committed - start_rows) / took:.1f}",
        "p50_ms": f"{statistics.median(ms):.2f}",
        "p99_ms": f"{ms[min(len(ms) - 1, int(len(ms) * 0.99))]:.2f}",
        "max_ms": f"{ms[-1]:.1f}",
    }
    if a.kill_pid:
        out["max_after_kill_ms"] = f"{max(after_kill) * 1000:.1f}" if after_kill else "none"
    print(" ".join(f"{k} {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
