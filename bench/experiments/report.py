#!/usr/bin/python3
"""The plots and the README of a bench/experiments.sh run.

    /usr/bin/python3 bench/experiments/report.py plot DIR
        DIR/NAME.png for each DIR/NAME.csv of the run (matplotlib: Debian's
        python3-matplotlib)
    /usr/bin/python3 bench/experiments/report.py readme DIR
        DIR/README.md: the run (DIR/run-info.txt: machine, date, command,
        emulated disk latency), then each experiment's plot with a paragraph
        on what it shows, every number in it read from the CSVs. Needs no
        matplotlib; a PNG that is missing is said to be.

Each paragraph states what the paper (or TOPs, or RAMA) reported and what
this run measured; it draws no conclusion the numbers do not carry.
"""
import csv
import os
import sys

EXPERIMENTS = ["fig5", "fig6", "fig7", "scalability", "policies", "placement", "sqlite", "replicas"]
TITLES = {
    "fig5": "Pagefile section 5.1 (figure 5): ms/page against concurrency",
    "fig6": "Pagefile section 5.2 (figure 6): bytes/s against page size",
    "fig7": "Pagefile section 5.3 (figure 7): local against remote by the share of cache hits",
    "scalability": "Scalability (the paper's open question 5): clients against servers",
    "policies": "TOPs: buffer policies against access patterns",
    "placement": "RAMA: hash against stripe placement",
    "sqlite": "SQLite's own page stream, captured and replayed",
    "replicas": "Replicas: R copies of each page against one",
}
SQLITE_WORKLOADS = ["insert", "reads", "scan", "txn", "txn-cold"]
VARIANT_LABELS = {
    "hit": "every page a server cache hit",
    "miss-sync-write": "miss: writes on the disk before the answer (--sync dsync)",
    "miss-emulated": "miss: emulated disk (--disk-latency)",
}
MODE_LABELS = {
    "local-disk": "local Pagefile (misses: this machine's disk)",
    "remote-disk": "remote, 6 servers (misses: this machine's disk)",
    "remote-emulated": "remote, 6 servers (misses: emulated disk)",
}
POLICIES = ["random", "sequential", "looping", "global-sequential"]
PATTERNS = {"scan": "one sequential scan", "loop": "repeated scans", "uniform": "uniform random",
            "hot": "hot set (10% of pages, 90% of reads)"}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(row, key):
    value = row.get(key, "")
    return float(value) if value not in ("", None) else float("nan")


def run_info(directory):
    info = {}
    path = os.path.join(directory, "run-info.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("=")
                info[key] = value
    return info


def size_label(size):
    size = int(size)
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


# ---------------------------------------------------------------------------
# Plots

def plot(directory):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = run_info(directory)
    latency = info.get("latency_ms", "?")
    run = info.get("experiments", " ".join(EXPERIMENTS)).split()
    made = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(directory, f"{name}.png"), dpi=110)
        plt.close(fig)
        made.append(f"{name}.png")

    def rows_of(name):
        path = os.path.join(directory, f"{name}.csv")
        return read_csv(path) if name in run and os.path.exists(path) else None

    styles = {"hit": "o-", "miss-sync-write": "s--", "miss-emulated": "^-",
              "local-disk": "o-", "remote-disk": "s--", "remote-emulated": "^-"}

    def lines(ax, rows, key, labels, x, y, xlabel, ylabel, title):
        """One line per value of `key` named in `labels`, points (x(r), y(r)); a log y axis."""
        for value, label in labels.items():
            pts = [(x(r), y(r)) for r in rows if r[key] == value]
            if pts:
                ax.plot(*zip(*sorted(pts)), styles[value],
                        label=label.replace("emulated disk", f"emulated {latency} ms disk"))
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)

    def by_page_size(rows):
        """A panel per page size: the figure, and (axes, size, that size's rows) for each."""
        sizes = sorted({r["page_size"] for r in rows}, key=int)
        fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.2), squeeze=False)
        return fig, [(ax, size, [r for r in rows if r["page_size"] == size]) for ax, size in zip(axes[0], sizes)]

    rows = rows_of("fig5")
    if rows:
        fig, panels = by_page_size(rows)
        for ax, size, sized in panels:
            lines(ax, sized, "variant", VARIANT_LABELS, lambda r: int(r["concurrency"]), lambda r: num(r, "ms_per_page"),
                  "concurrency (requests in flight)", "ms per page (log)", f"{size_label(size)} pages, 6 servers")
        save(fig, "fig5")

    rows = rows_of("fig6")
    if rows:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        lines(ax, rows, "variant", VARIANT_LABELS, lambda r: int(r["page_size"]) / 1024,
              lambda r: num(r, "bytes_per_s") / 1e6, "page size (KiB)", "MB/s (log)", "concurrency 12, 6 servers")
        ax.set_xscale("log", base=2)
        save(fig, "fig6")

    rows = rows_of("fig7")
    if rows:
        fig, panels = by_page_size(rows)
        for ax, size, sized in panels:
            lines(ax, sized, "mode", MODE_LABELS, lambda r: int(r["hit_percent"]), lambda r: num(r, "bytes_per_s") / 1e6,
                  "cache hits (%)", "MB/s (log)", f"{size_label(size)} pages, concurrency 12")
        save(fig, "fig7")

    rows = rows_of("scalability")
    if rows:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for clients in sorted({r["clients"] for r in rows}, key=int):
            pts = sorted((int(r["servers"]), num(r, "total_pages_per_s"), num(r, "per_client_pages_per_s"))
                         for r in rows if r["clients"] == clients)
            xs = [p[0] for p in pts]
            axes[0].plot(xs, [p[1] for p in pts], "o-", label=f"{clients} client process(es)")
            axes[1].plot(xs, [p[2] for p in pts], "o-", label=f"{clients} client process(es)")
        for ax, what in zip(axes, ["total pages/s", "pages/s per client"]):
            ax.set_xlabel("servers")
            ax.set_ylabel(what)
            ax.set_title(f"{what}, concurrency 12 each, emulated {latency} ms disk")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        save(fig, "scalability")

    rows = rows_of("policies")
    if rows:
        pools = sorted({r["pool_percent"] for r in rows}, key=int)
        patterns = [p for p in PATTERNS if any(r["pattern"] == p for r in rows)]
        fig, axes = plt.subplots(2, len(pools), figsize=(6.5 * len(pools), 7.5), squeeze=False)
        width = 0.8 / len(POLICIES)
        for col, pool in enumerate(pools):
            for i, policy in enumerate(POLICIES):
                sel = {r["pattern"]: r for r in rows if r["pool_percent"] == pool and r["policy"] == policy}
                xs = [j + (i - 1.5) * width for j in range(len(patterns))]
                axes[0][col].bar(xs, [num(sel[p], "client_hit_ratio") if p in sel else 0 for p in patterns],
                                 width, label=policy)
                axes[0][col].plot(xs, [num(sel[p], "simulated_hit_ratio") if p in sel else float("nan")
                                       for p in patterns], "k.", markersize=6,
                                  label="simulated (pf-replay stats)" if i == 0 else None)
                axes[1][col].bar(xs, [num(sel[p], "pages_per_s") if p in sel else 0 for p in patterns],
                                 width, label=policy)
            axes[0][col].set_ylim(0, 1.25)
            for row, what in enumerate(["client pool hit ratio", "pages/s"]):
                ax = axes[row][col]
                ax.set_xticks(range(len(patterns)))
                ax.set_xticklabels([PATTERNS[p].split(" (")[0] for p in patterns], fontsize=8)
                ax.set_ylabel(what)
                ax.set_title(f"{what}, client pool {pool}% of the file")
                ax.grid(True, axis="y", alpha=0.3)
                ax.legend(fontsize=7, ncol=3 if row == 0 else 1, loc="upper left")
        save(fig, "policies")

    rows = rows_of("placement")
    if rows:
        groups = []
        for r in rows:
            key = (r["pattern"], r["stripe_pages"])
            if key not in groups:
                groups.append(key)
        fig, axes = plt.subplots(2, 1, figsize=(10, 7.5))
        for i, placement in enumerate(["hash", "stripe"]):
            sel = {(r["pattern"], r["stripe_pages"]): r for r in rows if r["placement"] == placement}
            xs = [j + (i - 0.5) * 0.38 for j in range(len(groups))]
            axes[0].bar(xs, [num(sel[g], "pages_per_s") if g in sel else 0 for g in groups], 0.38, label=placement)
            axes[1].bar(xs, [num(sel[g], "busiest_server_share") if g in sel else 0 for g in groups], 0.38,
                        label=placement)
        axes[1].axhline(1 / 6, color="k", linestyle=":", linewidth=1, label="even (1/6)")
        for ax, what in zip(axes, ["pages/s", "busiest server's share of the reads"]):
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"{p}\nunit {u}" for p, u in groups], fontsize=7)
            ax.set_ylabel(what)
            ax.set_title(f"{what}, 6 servers, emulated {latency} ms disk, concurrency 12")
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        save(fig, "placement")

    rows = rows_of("sqlite")
    if rows:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for workload in sorted({r["workload"] for r in rows}):
            pts = sorted((int(r["concurrency"]), num(r, "ms_per_page")) for r in rows if r["workload"] == workload)
            ax.plot(*zip(*pts), "o-", label=workload)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("ms per page")
        ax.set_title(f"captured SQLite traces replayed, 6 servers, emulated {latency} ms disk")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        save(fig, "sqlite")

    rows = rows_of("replicas")
    if rows:
        counts = sorted({r["replicas"] for r in rows}, key=int)
        workloads = [w for w in SQLITE_WORKLOADS if pick(rows, kind=f"sqlite-{w}")]
        fig, axes = plt.subplots(1, 3 if workloads else 2, figsize=(16 if workloads else 11, 4.2))
        for ax, kind in zip(axes, ["read", "write"]):
            for i, count in enumerate(counts):
                pts = sorted((int(r["concurrency"]), num(r, "pages_per_s"), num(r, "ideal")) for r in rows
                             if r["replicas"] == count and r["kind"] == kind)
                if not pts:
                    continue
                line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"R = {count}")
                if kind == "write" or i == 0:  # reads share one ideal
                    ax.plot([p[0] for p in pts], [p[2] for p in pts], ":", color=line.get_color() if kind == "write"
                            else "k", label=f"ideal, R = {count}" if kind == "write" else "ideal")
            ax.set_xlabel("concurrency (requests in flight)")
            ax.set_ylabel("pages/s")
            ax.set_title(f"random {kind}s, 6 servers, emulated {latency} ms disk")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        if workloads:
            ax = axes[2]
            width = 0.8 / len(counts)
            for i, count in enumerate(counts):
                ratios = [sqlite_relative(rows, count, w) for w in workloads]
                ax.bar([j + (i - (len(counts) - 1) / 2) * width for j in range(len(workloads))], ratios, width,
                       label=f"R = {count}")
            ax.axhline(1, color="k", linewidth=0.8)
            ax.set_xticks(range(len(workloads)))
            ax.set_xticklabels(workloads, fontsize=8)
            ax.set_ylabel("seconds, relative to R = 1")
            ax.set_title("SQLite through the VFS, concurrency 12")
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        save(fig, "replicas")

    print("plots: " + " ".join(made))


# ---------------------------------------------------------------------------
# The README's paragraphs: what each plot shows, with this run's numbers.

def fmt(x, digits=3):
    if x != x:  # nan
        return "?"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def paragraphs(parts):
    """The first of `parts` a paragraph of its own, the rest the next."""
    return " ".join(parts[:1]) + "\n\n" + " ".join(parts[1:])


def pick(rows, **where):
    for r in rows:
        if all(r.get(k) == str(v) for k, v in where.items()):
            return r
    return None


def text_fig5(rows, p, latency):
    sizes = sorted({r["page_size"] for r in rows}, key=int)
    levels = sorted({int(r["concurrency"]) for r in rows})
    lo, hi = levels[0], levels[-1]
    mid = 12 if 12 in levels else levels[len(levels) // 2]
    parts = [f"Random pages of a {p.get('file_kib', '?')} KiB file over 6 pagefiled on "
             f"loopback, {p.get('ops', '?')} operations a run, at concurrency "
             f"{', '.join(map(str, levels))}. Three lines per page size: reads that are all server cache hits "
             f"(pools larger than the file, warmed); writes that each reach this machine's disk before they are "
             f"answered (`pagefiled --sync dsync`, the paper's O_SYNC measurement of a miss); reads that all miss "
             f"an EMULATED disk of {latency} ms per access, one at a time per server (`--disk-latency {latency}`, no pool)."]
    for size in sizes:
        r = {v: {int(x["concurrency"]): num(x, "ms_per_page") for x in rows
                 if x["page_size"] == size and x["variant"] == v} for v in VARIANT_LABELS}
        hit, sync, emu = r["hit"], r["miss-sync-write"], r["miss-emulated"]
        nan = float("nan")
        s = (f"{size_label(size)}: at concurrency {lo} a hit took {fmt(hit.get(lo, nan))} ms/page, "
             f"a synchronous-write miss {fmt(sync.get(lo, nan))} and an emulated miss {fmt(emu.get(lo, nan))}")
        for level in sorted({mid, hi}):
            if level != lo:
                s += f"; at {level}, {fmt(hit.get(level, nan))}, {fmt(sync.get(level, nan))} and {fmt(emu.get(level, nan))}"
        s += "."
        if lo in emu and mid in emu and hi in emu and mid != hi:
            s += (f" From {lo} to {mid} the emulated misses' ms/page fell {fmt(emu[lo] / emu[mid])}x, "
                  f"from {mid} to {hi} another {fmt(emu[mid] / emu[hi])}x (the paper: the miss curves flatten "
                  f"near 12 requests in flight over 6 servers).")
        if lo in hit and lo in sync and lo in emu:
            s += (f" The network's share of a page's latency at concurrency {lo} (hit over miss): "
                  f"{100 * hit[lo] / sync[lo]:.0f}% of a synchronous-write miss, {100 * hit[lo] / emu[lo]:.1f}% of "
                  f"an emulated one.")
        parts.append(s)
    shares = {}
    for size in sizes:
        hit = pick(rows, page_size=size, variant="hit", concurrency=lo)
        sync = pick(rows, page_size=size, variant="miss-sync-write", concurrency=lo)
        if hit and sync:
            shares[size] = num(hit, "ms_per_page") / num(sync, "ms_per_page")
    s = ("The paper measured the network's share (the hit line over the miss line at concurrency 1) at 35% "
         "for 1 KiB pages and 58% for 8 KiB, on 10 Mbit Ethernet with 30-50 ms disks")
    if "1024" in shares and "8192" in shares:
        s += (f"; here, against the synchronous-write misses, {100 * shares['1024']:.0f}% and "
              f"{100 * shares['8192']:.0f}%: "
              + ("larger for 8 KiB pages, as in the paper." if shares["8192"] > shares["1024"] else
                 "not larger for 8 KiB pages, unlike the paper."))
    else:
        s += "."
    parts.append(s)
    return paragraphs(parts)


def text_fig6(rows, p, latency):
    parts = [f"Concurrency 12, 6 servers, {p.get('ops', '?')} random operations a run on a "
             f"{p.get('file_kib', '?')} KiB file for each page size, the three variants of figure 5 "
             f"(hits; synchronous writes; the EMULATED {latency} ms disk)."]
    for variant in VARIANT_LABELS:
        pts = sorted((int(r["page_size"]), num(r, "bytes_per_s")) for r in rows if r["variant"] == variant)
        if not pts:
            continue
        best = max(pts, key=lambda x: x[1])
        parts.append(f"{VARIANT_LABELS[variant].capitalize()}: {fmt(pts[0][1] / 1e6)} MB/s at "
                     f"{size_label(pts[0][0])}, {fmt(pts[-1][1] / 1e6)} MB/s at {size_label(pts[-1][0])}, "
                     f"the most {fmt(best[1] / 1e6)} MB/s at {size_label(best[0])}.")
    parts.append("The paper's hits levelled off near 500 KB/s (its 10 Mbit network) and its misses rose up to "
                 "16 KiB pages, then tapered. The emulated disk charges the same time per access whatever the "
                 "page size, so its bytes/s grow with the page until the pipeline's own cost per byte shows.")
    return " ".join(parts)


def text_fig7(rows, p, latency):
    parts = [f"Concurrency 12, {p.get('ops', '?')} reads a run; a hit reads a page of a warm set of "
             f"{p.get('warm_pages', '?')} pages read once before the run, a miss a page nothing in the run read "
             f"before. The local Pagefile (pf-replay `--dir`) caches in the operating system's page cache; before "
             f"each local run the file's pages are dropped from it (`posix_fadvise(POSIX_FADV_DONTNEED)` after "
             f"`fdatasync`) and the warm set read back, so a local miss really reads this machine's disk "
             f"(`disk_read_kib` counts what each run made the kernel read). There is no emulated disk for local "
             f"files, so the remote side is measured twice: with the servers' misses on the same real disk "
             f"(their files dropped from the page cache the same way) and with the EMULATED {latency} ms disk."]
    for size in sorted({r["page_size"] for r in rows}, key=int):
        by = {m: {int(r["hit_percent"]): num(r, "bytes_per_s") for r in rows
                  if r["page_size"] == size and r["mode"] == m} for m in MODE_LABELS}
        hits = sorted(by["local-disk"])
        if not hits:
            continue
        lo, hi = hits[0], hits[-1]
        s = f"{size_label(size)}: at {lo}% hits local read {fmt(by['local-disk'][lo] / 1e6)} MB/s"
        if lo in by["remote-disk"]:
            s += f", remote on the same disk {fmt(by['remote-disk'][lo] / 1e6)}"
        if lo in by["remote-emulated"]:
            s += f", remote on the emulated disk {fmt(by['remote-emulated'][lo] / 1e6)}"
        s += f"; at {hi}% hits {fmt(by['local-disk'][hi] / 1e6)}"
        if hi in by["remote-disk"]:
            s += f", {fmt(by['remote-disk'][hi] / 1e6)}"
        if hi in by["remote-emulated"]:
            s += f" and {fmt(by['remote-emulated'][hi] / 1e6)}"
        s += " MB/s."
        local_drop = by["local-disk"][hi] / by["local-disk"][lo] if by["local-disk"][lo] else float("nan")
        s += f" From {hi}% to {lo}% hits local throughput fell {fmt(local_drop)}x"
        if lo in by["remote-disk"] and hi in by["remote-disk"] and by["remote-disk"][lo]:
            s += f", remote on the same disk {fmt(by['remote-disk'][hi] / by['remote-disk'][lo])}x"
        s += "."
        beats = [h for h in hits if h in by["remote-disk"] and by["remote-disk"][h] > by["local-disk"][h]]
        s += (f" Remote beat local on the same disk at {', '.join(f'{h}%' for h in beats)} hits." if beats else
              " Local beat remote on the same disk at every share of hits measured.")
        local = pick(rows, page_size=size, mode="local-disk", hit_percent=lo)
        remote = pick(rows, page_size=size, mode="remote-disk", hit_percent=lo)
        if local and num(local, "disk_read_kib") == num(local, "disk_read_kib"):
            misses = round(num(local, "pages") * (100 - lo) / 100)
            least = misses * max(4096, int(size)) // 1024
            s += (f" At {lo}% hits the local run read {fmt(num(local, 'disk_read_kib'))} KiB from the disk"
                  + (f" and the remote servers {fmt(num(remote, 'disk_read_kib'))} KiB" if remote else "")
                  + f" ({misses} misses of at least {max(4096, int(size)) // 1024} KiB each: {least} KiB).")
        parts.append(s)
    parts.append("The paper's claim, remote beats local once misses are common because remote misses overlap, "
                 "was made with a local disk as slow as the servers'; here the fair comparison is the two "
                 "'same disk' lines, and the emulated line shows what a remote miss costs at the paper's disk "
                 "latency.")
    return paragraphs(parts)


def text_scalability(rows, p, latency):
    parts = [f"C pf-replay processes at once, each reading random pages of its own file of "
             f"{p.get('file_pages', '?')} pages at concurrency 12, against N servers with the EMULATED "
             f"{latency} ms disk and no pools (every read a disk access): the ideal is N x {fmt(1000 / float(latency)) if latency not in ('', '?') else '?'} "
             f"pages/s shared by the clients. Total pages/s is all clients' pages over the wall time from the "
             f"first start to the last end; per-client is the mean of each client's own rate."]
    servers = sorted({int(r["servers"]) for r in rows})
    clients = sorted({int(r["clients"]) for r in rows})
    cells = []
    for n in servers:
        for c in clients:
            r = pick(rows, servers=n, clients=c)
            if r:
                cells.append(f"{n}s/{c}c {fmt(num(r, 'total_pages_per_s'))} ({fmt(num(r, 'per_client_pages_per_s'))} each)")
    parts.append("Measured (servers/clients: total (per client) pages/s): " + "; ".join(cells) + ".")
    # Servers added in proportion to clients: the question's case.
    diagonal = [(c, pick(rows, servers=c, clients=c)) for c in clients if pick(rows, servers=c, clients=c)]
    if len(diagonal) >= 2:
        first = num(diagonal[0][1], "per_client_pages_per_s")
        last = num(diagonal[-1][1], "per_client_pages_per_s")
        parts.append("With as many servers as clients (" + ", ".join(f"{c} on {c}" for c, _ in diagonal)
                     + ") each client read " + ", ".join(fmt(num(r, "per_client_pages_per_s")) for _, r in diagonal)
                     + f" pages/s: the last {100 * last / first:.0f}% of the first, so adding servers "
                     + ("kept" if last >= 0.9 * first else "did not keep")
                     + " per-client throughput within 10% as clients were added.")
    if servers and clients:
        n = servers[-1]
        row = [pick(rows, servers=n, clients=c) for c in clients]
        if all(row):
            parts.append(f"On {n} servers the total went from {fmt(num(row[0], 'total_pages_per_s'))} pages/s with "
                         f"{clients[0]} client to {fmt(num(row[-1], 'total_pages_per_s'))} with {clients[-1]} "
                         f"(ideal {n * 1000 / float(latency):.0f} if every disk were always busy)"
                         + (": one client's 12 requests in trace order leave some disks idle while others queue, "
                            "and more clients fill them." if num(row[-1], "total_pages_per_s") >
                            1.05 * num(row[0], "total_pages_per_s") else "."))
    return " ".join(parts)


def text_policies(rows, p, latency):
    parts = [f"A file of {p.get('file_pages', '?')} pages of 8 KiB on 6 servers with the EMULATED {latency} ms "
             f"disk and pools of {p.get('server_pages', '?')} pages each (restarted empty before every run); the "
             f"client's pool (`pf-replay run --cache-pages`) at 50% and 90% of the file runs each policy "
             f"(`--policy`); reads at concurrency 12, with room in the client's window for 12 pages of read-ahead beside them (`--window 24`). Patterns: one sequential scan; {p.get('passes', '?')} scans of "
             f"the whole file (larger than the pool); uniform random reads; a hot set of 10% of the pages taking "
             f"90% of the reads. Bars are the client pool's measured hit ratio (black dots: what `pf-replay stats` "
             f"simulates for the same trace and pool) and pages/s."]
    for pattern in PATTERNS:
        for pool in sorted({r["pool_percent"] for r in rows}, key=int):
            sel = [r for r in rows if r["pattern"] == pattern and r["pool_percent"] == pool]
            if not sel:
                continue
            top = max(num(r, "client_hit_ratio") for r in sel)
            best_hit = [r["policy"] for r in sel if num(r, "client_hit_ratio") >= top - 0.005]
            best_rate = max(sel, key=lambda r: num(r, "pages_per_s"))
            parts.append(f"{PATTERNS[pattern].capitalize()}, pool {pool}%: hit ratio "
                         + ", ".join(f"{r['policy']} {fmt(num(r, 'client_hit_ratio'))}" for r in sel)
                         + f"; best hit ratio: {' = '.join(best_hit)}; most pages/s: {best_rate['policy']} "
                         f"({fmt(num(best_rate, 'pages_per_s'))}).")
    gaps = [(abs(num(r, "client_hit_ratio") - num(r, "simulated_hit_ratio")), r) for r in rows
             if num(r, "simulated_hit_ratio") == num(r, "simulated_hit_ratio")]
    if gaps:
        close = sum(1 for g, _ in gaps if g <= 0.01)
        worst_gap, worst = max(gaps, key=lambda g: g[0])
        parts.append(f"`pf-replay stats` simulated the measured hit ratio within 0.01 in {close} of {len(gaps)} runs; "
                     f"the largest gap: {worst['policy']} on {PATTERNS[worst['pattern']]}, pool {worst['pool_percent']}%, "
                     f"simulated {fmt(num(worst, 'simulated_hit_ratio'))}, measured {fmt(num(worst, 'client_hit_ratio'))} "
                     f"(prefetched pages used: {worst['prefetch_used']}).")
    parts.append("TOPs' expectation: looping (MRU) wins repeated scans, sequential and global-sequential "
                 "(read-ahead) win a scan, random (LRU) wins a hot set, and no policy can win uniform random "
                 "reads (every one hits about as often as the pool is large).")
    return paragraphs(parts)


def text_placement(rows, p, latency):
    parts = [f"One file of {p.get('file_pages', '?')} pages of 8 KiB per placement over 6 servers with the "
             f"EMULATED {latency} ms disk and no pools; {p.get('reads', '?')} reads a run at concurrency 12: "
             f"sequential from page 0, uniform random, and strided with stride = 6 x the unit over the pages of "
             f"the file's first unit-sized slot of every stripe (under striping every read on one server). Stripe "
             f"places units round-robin; hash places each unit by rendezvous hashing, seeded by the servers' "
             f"addresses (loopback ports that change from run to run, so each run draws another layout). "
             f"The busiest server's share of the reads comes from each server's page-read counter (pagefile "
             f"status) before and after the run; 1/6 is even."]
    best_stripe = {}
    for pattern in ["sequential", "random", "strided"]:
        sel = [r for r in rows if r["pattern"] == pattern]
        if not sel:
            continue
        cells = []
        for unit in sorted({r["stripe_pages"] for r in sel}, key=int):
            h = pick(sel, placement="hash", stripe_pages=unit)
            s = pick(sel, placement="stripe", stripe_pages=unit)
            if h and s:
                cells.append(f"unit {unit}: hash {fmt(num(h, 'pages_per_s'))} pages/s (busiest {100 * num(h, 'busiest_server_share'):.0f}%), "
                             f"stripe {fmt(num(s, 'pages_per_s'))} ({100 * num(s, 'busiest_server_share'):.0f}%)")
        stripes = [r for r in sel if r["placement"] == "stripe"]
        hashes = [r for r in sel if r["placement"] == "hash"]
        if stripes and hashes:
            best_stripe[pattern] = max(stripes, key=lambda r: num(r, "pages_per_s"))
            best_hash = max(hashes, key=lambda r: num(r, "pages_per_s"))
            ratio = num(best_hash, "pages_per_s") / num(best_stripe[pattern], "pages_per_s")
            cells.append(f"the best hash is {100 * ratio:.0f}% of the best striping (unit {best_stripe[pattern]['stripe_pages']})")
        parts.append(f"{pattern.capitalize()}: " + "; ".join(cells) + ".")
    worst = [r for r in rows if r["pattern"] == "strided" and r["placement"] == "stripe"]
    if worst:
        parts.append("Striping's bad case, strided reads: its busiest server took "
                     + ", ".join(f"{100 * num(r, 'busiest_server_share'):.0f}% (unit {r['stripe_pages']})" for r in worst)
                     + " of the reads. RAMA's claim: hashing stays within 10-15% of the best striping and avoids "
                     "that case.")
    return paragraphs(parts)


def text_sqlite(rows, p, latency):
    workloads = {r["workload"] for r in rows}
    captured = []
    if "order-entry" in workloads:
        captured.append(f"the transactions of bench/experiments/order_entry.py (an order-entry workload in the "
                        f"spirit of TPC-C, {p.get('txns', '?')} transactions on a database loaded before the "
                        f"capture, whose pages are written to the servers first)")
    if "speedtest1" in workloads:
        captured.append(f"SQLite's speedtest1 --size {p.get('speedtest1_size', '?')} from an empty database")
    parts = [f"Traces of SQLite's page operations captured by the VFS (`PAGEFILE_TRACE=PATH`) on the local "
             f"default store: {' and '.join(captured)}. "
             f"The first {p.get('replay_ops', '?')} page operations of each are replayed (`pf-replay run`) over 6 "
             f"fresh servers with the EMULATED {latency} ms disk and pools of 64 pages, at each concurrency."]
    for workload in sorted({r["workload"] for r in rows}):
        pts = sorted((int(r["concurrency"]), num(r, "ms_per_page")) for r in rows if r["workload"] == workload)
        r0 = pick(rows, workload=workload)
        parts.append(f"{workload}: {r0['trace_page_ops']} page operations captured, {r0['replayed_page_ops']} replayed "
                     f"({r0['reads']} reads, {r0['writes']} writes, {r0['syncs']} syncs); ms/page "
                     + ", ".join(f"{fmt(ms)} at {c}" for c, ms in pts)
                     + f" ({fmt(pts[0][1] / pts[-1][1])}x from {pts[0][0]} to {pts[-1][0]}).")
    parts.append("A replay keeps SQLite's order, and each sync, truncate and close first waits for every request "
                 "of its file still in flight, so the curve flattens where SQLite's own stream stops offering "
                 "independent pages; figure 5's emulated-miss line is the same measurement on random pages.")
    return paragraphs(parts)


def sqlite_relative(rows, count, workload):
    """A SQLite workload's seconds with `count` copies over its seconds with one (nan: a row missing)."""
    one, this = pick(rows, replicas="1", kind=f"sqlite-{workload}"), pick(rows, replicas=count, kind=f"sqlite-{workload}")
    return num(this, "seconds") / num(one, "seconds") if one and this else float("nan")


def text_replicas(rows, p, latency):
    counts = sorted({r["replicas"] for r in rows}, key=int)
    parts = [f"`bench/replicas.sh` on 6 pagefiled with the EMULATED {latency} ms disk behind pools of "
             f"{p.get('server_pages', '?')} pages: one file of {p.get('file_pages', '?')} pages of 8 KiB per replica "
             f"count R, striped page by page, each page on R distinct servers. Random reads in trace order and random "
             f"writes at each concurrency, about {p.get('seconds', '?')} s a run, every page read verified. A read "
             f"goes to the copy whose server has the least work left; a write is confirmed when every copy has it. "
             f"The ideal is one uncached access per server per {latency} ms: reads min(c, 6) x "
             f"{fmt(1000 / float(latency)) if latency not in ('', '?') else '?'} pages/s, writes min(c x R, 6) x "
             f"{fmt(1000 / float(latency)) if latency not in ('', '?') else '?'} / R."]
    for kind in ["read", "write"]:
        for count in counts:
            pts = sorted((int(r["concurrency"]), num(r, "pages_per_s"), num(r, "percent_of_ideal")) for r in rows
                         if r["replicas"] == count and r["kind"] == kind)
            if pts:
                parts.append(f"{kind.capitalize()}s, R = {count}: "
                             + ", ".join(f"{fmt(rate)} pages/s at {c} ({pct:.0f}%)" for c, rate, pct in pts) + ".")
    at12 = {count: pick(rows, replicas=count, kind="read", concurrency=12) for count in counts}
    if at12.get("1") and at12.get("2"):
        parts.append(f"At concurrency 12 one copy reached {num(at12['1'], 'percent_of_ideal'):.0f}% of the ideal "
                     f"and two copies {num(at12['2'], 'percent_of_ideal'):.0f}% (issue 16 asks at least 90% for R = 2): "
                     f"with one copy a batch of random reads waits for its busiest server, with two each read can "
                     f"avoid the busier one (the power of two choices).")
    workloads = [w for w in SQLITE_WORKLOADS if pick(rows, kind=f"sqlite-{w}")]
    if workloads:
        cells = []
        for count in counts:
            if count == "1":
                continue
            relative = {w: sqlite_relative(rows, count, w) for w in workloads}
            ratios = [f"{w} {fmt(r)}x" for w, r in relative.items() if r == r]  # (nan: a row missing)
            cells.append(f"R = {count}: " + ", ".join(ratios))
        parts.append(f"SQLite's workloads (bench/sqlite_vfs_workload.py, {p.get('sqlite_rows', '?')} rows, "
                     f"concurrency 12) took, against R = 1: " + "; ".join(cells) + ".")
    return paragraphs(parts)


def params(info, name):
    out = {}
    for word in info.get(f"{name}_params", "").split():
        key, _, value = word.partition("=")
        out[key] = value
    # "sizes=1024 8192" spans words: keep the first word only for such keys
    return out


TEXTS = {"fig5": text_fig5, "fig6": text_fig6, "fig7": text_fig7, "scalability": text_scalability,
         "policies": text_policies, "placement": text_placement, "sqlite": text_sqlite,
         "replicas": text_replicas}


def readme(directory):
    info = run_info(directory)
    run = info.get("experiments", " ".join(EXPERIMENTS)).split()
    lines = ["# Pagefile's experiments", "",
             "Written by `bench/experiments.sh` (see bench/README.md): each experiment ran against real "
             "`pagefiled` processes on loopback; every figure below comes from the CSV beside it, one row per run "
             "(pf-replay's own rows under `raw/`). Figures depend on the machine; compare levels within this run.",
             "",
             "| | |", "| --- | --- |",
             f"| command | `{info.get('command', '?')}` |",
             f"| date (UTC) | {info.get('date', '?')} |",
             f"| machine | {info.get('nproc', '?')} CPUs ({info.get('cpu', '?')}), {info.get('memory', '?')} memory, "
             f"kernel {info.get('kernel', '?')} |",
             f"| data | {info.get('filesystem', '?')} |",
             f"| emulated disk | {info.get('latency_ms', '?')} ms per uncached page access, one at a time per server "
             f"(`pagefiled --disk-latency {info.get('latency_ms', '?')}`), wherever a figure says EMULATED |",
             f"| binaries | {info.get('build', '?')} (tools/pagefiled, tools/pf-replay, tools/pagefile, vfs/pagefile.so) |",
             f"| scripts | bench/experiments.sh at commit {info.get('commit', '?')} |",
             f"| load average (1, 5, 15 min) | {info.get('load_start', '?')} at the start, {info.get('load_end', '?')} at the end |",
             f"| wall time | {info.get('wall_seconds', '?')} s"
             + (" (--quick: tiny sizes, for the test suite; not figures to quote)" if info.get("quick") == "1" else "")
             + " |", ""]
    if info.get("disk_warning"):
        lines += [f"**Warning:** {info['disk_warning']}.", ""]
    if info.get("plots_skipped"):
        lines += [f"**Plots skipped:** {info['plots_skipped']}.", ""]
    for name in run:
        lines += [f"## {TITLES.get(name, name)}", ""]
        seconds = info.get(f"seconds_{name}")
        if info.get(f"skipped_{name}"):
            lines += [f"Skipped: {info[f'skipped_{name}']}.", ""]
            continue
        path = os.path.join(directory, f"{name}.csv")
        if not os.path.exists(path):
            lines += ["No CSV was written.", ""]
            continue
        rows = read_csv(path)
        if os.path.exists(os.path.join(directory, f"{name}.png")):
            lines += [f"![{name}]({name}.png)", ""]
        else:
            lines += [f"(no {name}.png: {info.get('plots_skipped', 'the plot was not made')})", ""]
        try:
            lines += [TEXTS[name](rows, params(info, name), info.get("latency_ms", "?")), ""]
        except (KeyError, ValueError, ZeroDivisionError, TypeError) as error:
            lines += [f"(the paragraph could not be written from {name}.csv: {error!r})", ""]
        extra = info.get(f"{name}_speedtest1_skipped")
        if extra:
            lines += [f"speedtest1 skipped: {extra}.", ""]
        lines += [f"Data: [{name}.csv]({name}.csv), {len(rows)} runs"
                  + (f"; {seconds} s" if seconds else "") + ".", ""]
    with open(os.path.join(directory, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {os.path.join(directory, 'README.md')}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("plot", "readme"):
        sys.exit(__doc__)
    {"plot": plot, "readme": readme}[sys.argv[1]](sys.argv[2])
