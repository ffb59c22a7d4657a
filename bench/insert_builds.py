#!/usr/bin/python3
"""One insert transaction on local Pagefiles, across builds and checksum settings.

    /usr/bin/python3 bench/insert_builds.py --so A/vfs/pagefile.so --so B/vfs/pagefile.so \\
        [--rounds 12] [--synchronous FULL] [--dir /tmp/insert-builds]

Each round runs, for each --so with checksums=on and for the last --so with
checksums=off (each first in turn, round by round), a fresh process that inserts 2000
rows of 3000 bytes (one 4 KiB page each) into a fresh database in one transaction, five times; it prints the medians of wall-clock
and CPU time (user + system, all threads) of each, and each one's ratio to the last
(checksums off). What a page's checksum costs on an append, and what a change to that path
gains, side by side in one run: the CPU time is steadier than the wall clock on a shared
machine. Run it with Debian's /usr/bin/python3 (its sqlite3 module loads extensions).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import os, shutil, sqlite3, sys, time, json
sys.path.insert(0, sys.argv[5])
from pagefile_extension import load_pagefile
load_pagefile(sys.argv[1])
checksums, sync, d = sys.argv[2], sys.argv[3], sys.argv[4]
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
blob = os.urandom(3000)
out = []
for r in range(5):
    path = f"{d}/w-{r}.db"
    db = sqlite3.connect(f"file:{path}?vfs=pagefile&checksums={checksums}", uri=True, isolation_level=None)
    db.execute(f"PRAGMA synchronous={sync}")
    db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")
    c0, t0 = time.process_time(), time.perf_counter()
    db.execute("BEGIN")
    for _ in range(2000):
        db.execute("INSERT INTO t(pad) VALUES (?)", (blob,))
    db.execute("COMMIT")
    out.append((time.perf_counter() - t0, time.process_time() - c0))
    db.close()
    os.unlink(path)
shutil.rmtree(d)
print(json.dumps(out))
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--so", action="append", required=True, help="a build's vfs/pagefile.so (repeatable)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--synchronous", default="FULL")
    parser.add_argument("--dir", default="/tmp/insert-builds")
    args = parser.parse_args()
    configs = [(f"{so} on", so, "on") for so in args.so] + [(f"{args.so[-1]} off", args.so[-1], "off")]
    env = dict(os.environ)
    env.pop("PAGEFILE_BUS", None)  # local Pagefiles at their paths
    here = os.path.dirname(os.path.abspath(__file__))
    times = {name: [] for name, _, _ in configs}
    for r in range(args.rounds):
        # Each goes first in turn: the one after another meets the machine
        # that one left busy (as bench/lib.sh's turns).
        for name, so, checksums in configs[r % len(configs):] + configs[:r % len(configs)]:
            run = subprocess.run([sys.executable, "-c", CHILD, so, checksums, args.synchronous, args.dir, here],
                                 capture_output=True, text=True, env=env)
            if run.returncode != 0:
                sys.exit(f"insert_builds: {name} failed:\n{run.stderr}")
            times[name] += json.loads(run.stdout)
    base = configs[-1][0]
    print(f"synchronous={args.synchronous}, medians of {args.rounds * 5} transactions of 2000 inserts")
    print(f"{'build, checksums':60} {'wall ms':>9} {'ratio':>6} {'cpu ms':>9} {'ratio':>6}")
    med = {name: [statistics.median(t[i] for t in v) for i in (0, 1)] for name, v in times.items()}
    for name, _, _ in configs:
        wall, cpu = med[name]
        print(f"{name:60} {wall * 1000:9.2f} {wall / med[base][0]:6.3f} {cpu * 1000:9.2f} {cpu / med[base][1]:6.3f}")


if __name__ == "__main__":
    main()
