#!/usr/bin/python3
"""Checks what `bash bench/experiments.sh --quick --out DIR` wrote: each CSV
with its columns and the rows of the quick sizes, each PNG a PNG, and the
README naming the machine and showing every plot. Speed is not checked.

    /usr/bin/python3 bench/experiments/check_quick.py DIR

The expected shapes are written out here on purpose, not read from the
script: a run that loses rows fails. Exits 0 when everything is there, 77
(skipped) when only the PNGs could not be checked because matplotlib is
missing, 1 otherwise, listing every problem.
"""
import csv
import os
import sys

# Figures 5 and 6 write one kind of CSV: these columns, these variants.
FIG5_6_COLUMNS = ("page_size,variant,op,concurrency,ops,pages,seconds,ms_per_page,pages_per_s,bytes_per_s,"
                  "server_hits,server_misses,servers,latency_ms,sync_mode")
FIG5_6_VARIANTS = {"hit", "miss-sync-write", "miss-emulated"}
# name: (columns, {column: the set of values the quick run must have},
#        rows: the product of those sets' sizes unless given)
SHAPES = {
    "fig5": (FIG5_6_COLUMNS,
             {"page_size": {"1024", "8192"}, "concurrency": {"1", "4", "12"}, "variant": FIG5_6_VARIANTS}),
    "fig6": (FIG5_6_COLUMNS,
             {"page_size": {"1024", "8192", "65536"}, "concurrency": {"12"}, "variant": FIG5_6_VARIANTS}),
    "fig7": ("page_size,mode,hit_percent,ops,pages,seconds,pages_per_s,bytes_per_s,server_hit_percent,"
             "disk_read_kib,latency_ms",
             {"page_size": {"1024", "8192"}, "hit_percent": {"0", "50", "100"},
              "mode": {"local-disk", "remote-disk", "remote-emulated"}}),
    "scalability": ("servers,clients,concurrency,latency_ms,ops_per_client,pages_total,wall_seconds,"
                    "total_pages_per_s,per_client_pages_per_s,min_client_pages_per_s,max_client_pages_per_s",
                    {"servers": {"1", "2"}, "clients": {"1", "2"}}),
    "policies": ("pattern,policy,pool_percent,pool_pages,file_pages,reads,client_hit_ratio,simulated_hit_ratio,"
                 "server_hit_ratio,pages_per_s,seconds,prefetch_used,prefetch_wasted",
                 {"pattern": {"scan", "loop", "uniform", "hot"}, "pool_percent": {"50", "90"},
                  "policy": {"random", "sequential", "looping", "global-sequential"}}),
    "placement": ("pattern,placement,stripe_pages,stride,reads,seconds,pages_per_s,busiest_server_share,server_reads",
                  {"pattern": {"sequential", "random", "strided"}, "placement": {"hash", "stripe"},
                   "stripe_pages": {"1", "8", "64"}}),
    "sqlite": ("workload,concurrency,ops,pages,reads,writes,syncs,seconds,ms_per_page,pages_per_s,"
               "trace_page_ops,replayed_page_ops,latency_ms,servers",
               {"concurrency": {"1", "12"}}),
    "replicas": ("replicas,kind,concurrency,ops,seconds,pages_per_s,ideal,percent_of_ideal",
                 {"replicas": {"1", "2"}, "kind": {"read", "write", "sqlite-insert", "sqlite-reads", "sqlite-scan",
                                                   "sqlite-txn", "sqlite-txn-cold"}}),
}
# Columns that must hold a positive number in every row.
POSITIVE = {"fig5": ["pages_per_s", "ms_per_page"], "fig6": ["pages_per_s", "bytes_per_s"],
            "fig7": ["pages_per_s", "bytes_per_s"], "scalability": ["total_pages_per_s", "per_client_pages_per_s"],
            "policies": ["pages_per_s"], "placement": ["pages_per_s", "busiest_server_share"],
            "sqlite": ["pages_per_s", "ms_per_page"], "replicas": ["seconds"]}


def run_info(directory):
    info = {}
    with open(os.path.join(directory, "run-info.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            info[key] = value
    return info


def check_csv(directory, name, problems):
    columns, values = SHAPES[name]
    path = os.path.join(directory, f"{name}.csv")
    if not os.path.exists(path):
        problems.append(f"{name}.csv is missing")
        return None
    with open(path, newline="") as f:
        header = f.readline().strip()
        f.seek(0)
        rows = list(csv.DictReader(f))
    if header != columns:
        problems.append(f"{name}.csv: header {header!r}, expected {columns!r}")
        return rows
    expected = 1
    for column, wanted in values.items():
        expected *= len(wanted)
        seen = {r[column] for r in rows}
        if seen != wanted:
            problems.append(f"{name}.csv: {column} has {sorted(seen)}, expected {sorted(wanted)}")
    if name == "sqlite":
        expected *= len({r["workload"] for r in rows}) or 1
    if name == "replicas":  # reads and writes at levels 1 and 6, SQLite's five workloads at 12 only
        expected = len(values["replicas"]) * (2 * 2 + 5)
    if len(rows) != expected:
        problems.append(f"{name}.csv: {len(rows)} rows, expected {expected}")
    keys = [tuple(r[c] for c in values) + ((r["workload"],) if name == "sqlite" else ())
            + ((r["concurrency"],) if name == "replicas" else ()) for r in rows]
    if len(set(keys)) != len(keys):
        problems.append(f"{name}.csv: a combination of {', '.join(values)} appears twice")
    for r in rows:
        for column in POSITIVE[name]:
            try:
                ok = float(r[column]) > 0
            except ValueError:
                ok = False
            if not ok:
                problems.append(f"{name}.csv: {column} is {r[column]!r} in row {r}")
                break
        if name == "replicas" and r["kind"] in ("read", "write"):
            try:
                ok = float(r["pages_per_s"]) > 0 and float(r["ideal"]) > 0
            except ValueError:
                ok = False
            if not ok:
                problems.append(f"replicas.csv: no rate or ideal in row {r}")
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    problems = []
    info = run_info(directory)
    if info.get("quick") != "1":
        problems.append("run-info.txt does not say quick=1")
    plots = not info.get("plots_skipped")
    for name in SHAPES:
        skipped = info.get(f"skipped_{name}")
        if skipped:
            if name != "sqlite":
                problems.append(f"{name} was skipped: {skipped}")
            else:
                print(f"note: {name} skipped: {skipped}")
            continue
        check_csv(directory, name, problems)
        png = os.path.join(directory, f"{name}.png")
        if plots:
            if not os.path.exists(png):
                problems.append(f"{name}.png is missing")
            else:
                with open(png, "rb") as f:
                    if f.read(8) != b"\x89PNG\r\n\x1a\n" or os.path.getsize(png) < 2000:
                        problems.append(f"{name}.png is not a plot (no PNG signature, or under 2000 bytes)")
    readme = os.path.join(directory, "README.md")
    if not os.path.exists(readme):
        problems.append("README.md is missing")
    else:
        text = open(readme).read()
        for needle in ["| command |", "| date (UTC) |", "CPUs", "memory, kernel", "| emulated disk |"]:
            if needle not in text:
                problems.append(f"README.md lacks {needle!r}")
        for name in SHAPES:
            if plots and not info.get(f"skipped_{name}") and f"![{name}]({name}.png)" not in text:
                problems.append(f"README.md does not show {name}.png")
            if info.get(f"skipped_{name}") and "Skipped:" not in text:
                problems.append(f"README.md does not say that {name} was skipped")
    for problem in problems:
        print(f"check_quick: {problem}")
    if problems:
        sys.exit(1)
    if not plots:
        print(f"check_quick: CSVs and README fine; PNGs not checked: {info['plots_skipped']}")
        sys.exit(77)
    print(f"check_quick: every CSV, PNG and the README as expected in {directory}")


if __name__ == "__main__":
    main()
