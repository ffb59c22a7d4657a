#!/usr/bin/python3
"""Helpers of bench/experiments.sh that pf-replay does not have.

    util.py hitmix --file NAME --file-pages P --warm-pages W --ops N
                   --hit-percent H --page-size B --seed S [--group-pages G]
        A read trace of N reads: round(N * H / 100) of them on the warm
        pages [P - W, P) (uniform), the rest on pages of [0, P - W) each read
        once, at most one in each aligned group of G pages (default 1), in
        a random order. The warm set is at the end of the file so that the
        kernel's read-ahead of the warm pass reads no cold page; with G
        pages of the file in one 4 KiB page of the page cache (G larger
        for a file striped over servers, whose pages interleave), a cold
        read brings no other cold page of the trace in. Needs N - hits <=
        (P - W) / G.
    util.py warm --file NAME --first F --pages W --page-size B
        One sequential read of pages [F, F + W): what makes them the warm set.
    util.py strided --file NAME --file-pages P --stride S --wrap U --ops N
                    --page-size B
        Reads of pages 0, S, 2S, ... below P, then 1, 1 + S, ..., up to
        U - 1, U - 1 + S, ..., then from 0 again: the bad case of striping
        in units of U over K servers when S = K * U, where every read lands
        on the first unit's server.
    util.py evict PATH...
        Drops the files' pages (every regular file under each PATH) from
        the operating system's page cache: fdatasync, then
        posix_fadvise(POSIX_FADV_DONTNEED). Later reads of them go to the
        disk. Prints the number of files.
    util.py rusage OUT -- COMMAND...
        Runs COMMAND and writes "inblock_kib=K" to OUT (the file system
        input its process did, from wait4's ru_inblock, 512-byte units);
        exits with COMMAND's status.
    util.py io_read_kib PID...
        The read_bytes of /proc/PID/io summed (bytes the processes made the
        kernel read from storage), in KiB.
    util.py trace_prefix TRACE OPS
        The trace's lines up to and including its OPS-th read or write (a
        prefix of a valid trace is valid: files still open at the end are
        closed by the replay); prints "read/write operations kept of total"
        on standard error.
    util.py trace_fill TRACE
        A trace that writes, once, every page TRACE reads before it writes
        it, file by file (with the page size of the file's first open in
        TRACE), so that a replay of TRACE on a fresh store finds on the disk
        the pages of a database that existed before the capture began.

Traces follow doc/trace_format.md; every generated one starts with a
comment naming the command that makes it again.
"""
import os
import random
import sys


def header(argv):
    return "# bench/experiments/util.py " + " ".join(argv) + "\n"


def options(argv, names):
    values = {}
    i = 0
    while i < len(argv):
        key = argv[i]
        if not key.startswith("--") or key[2:] not in names or i + 1 >= len(argv):
            sys.exit(f"util.py: bad argument {key!r} (expected {', '.join('--' + n for n in names)})")
        values[key[2:]] = argv[i + 1]
        i += 2
    missing = [n for n in names if n not in values]
    if missing:
        sys.exit(f"util.py: missing --{missing[0]}")
    return values


def hitmix(argv):
    argv = list(argv)
    if "--group-pages" not in argv:
        argv += ["--group-pages", "1"]
    o = options(argv, ["file", "file-pages", "warm-pages", "ops", "hit-percent", "page-size", "seed", "group-pages"])
    pages, warm, ops, group = int(o["file-pages"]), int(o["warm-pages"]), int(o["ops"]), int(o["group-pages"])
    hits = round(ops * float(o["hit-percent"]) / 100)
    cold = ops - hits
    groups = (pages - warm) // group
    if cold > groups:
        sys.exit(f"util.py hitmix: {cold} cold reads need {cold} groups of {group} pages before the {warm} warm "
                 f"ones, the file has {groups}")
    rng = random.Random(int(o["seed"]))
    reads = ([pages - warm + rng.randrange(warm) for _ in range(hits)] +
             [g * group + rng.randrange(group) for g in rng.sample(range(groups), cold)])
    rng.shuffle(reads)
    name = o["file"]
    out = [header(["hitmix"] + argv), f"open {name} {o['page-size']} random\n"]
    out += [f"read {name} {p}\n" for p in reads]
    out.append(f"close {name}\n")
    sys.stdout.write("".join(out))


def warm(argv):
    o = options(argv, ["file", "first", "pages", "page-size"])
    name, first = o["file"], int(o["first"])
    out = [header(["warm"] + argv), f"open {name} {o['page-size']} random\n"]
    out += [f"read {name} {p}\n" for p in range(first, first + int(o["pages"]))]
    out.append(f"close {name}\n")
    sys.stdout.write("".join(out))


def strided(argv):
    o = options(argv, ["file", "file-pages", "stride", "wrap", "ops", "page-size"])
    pages, stride, wrap, ops = int(o["file-pages"]), int(o["stride"]), int(o["wrap"]), int(o["ops"])
    name = o["file"]
    out = [header(["strided"] + argv), f"open {name} {o['page-size']} random\n"]
    offset, page = 0, 0
    for _ in range(ops):
        out.append(f"read {name} {page}\n")
        page += stride
        if page >= pages:
            offset = (offset + 1) % max(1, min(wrap, stride, pages))
            page = offset
    out.append(f"close {name}\n")
    sys.stdout.write("".join(out))


def evict(argv):
    count = 0
    paths = []
    for top in argv:
        if os.path.isdir(top):
            for root, _, files in os.walk(top):
                paths += [os.path.join(root, f) for f in files]
        else:
            paths.append(top)
    for path in paths:
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            count += 1
        finally:
            os.close(fd)
    print(count)


def rusage(argv):
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("util.py rusage OUT -- COMMAND...")
    out, command = argv[0], argv[2:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    with open(out, "w") as f:
        f.write(f"inblock_kib={usage.ru_inblock // 2}\n")
    sys.exit(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8)


def io_read_kib(argv):
    total = 0
    for pid in argv:
        try:
            with open(f"/proc/{pid}/io") as f:
                for line in f:
                    if line.startswith("read_bytes:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    print(total // 1024)


def operation(line):
    """The words of a trace line without a leading timestamp (a captured
    trace may carry one), or [] for a comment or a blank line."""
    words = line.split("#", 1)[0].split()
    if words and words[0].lstrip("+@").replace(".", "", 1).isdigit():
        words = words[1:]
    return words


def trace_fill(argv):
    if len(argv) != 1:
        sys.exit("util.py trace_fill TRACE")
    sizes, pages, written, order = {}, {}, set(), []
    with open(argv[0]) as f:
        for line in f:
            words = operation(line)
            if not words:
                continue
            if words[0] == "open" and len(words) >= 2:
                name = words[1]
                if name not in pages:
                    pages[name] = set()
                    order.append(name)
                if name not in sizes and len(words) >= 3 and words[2].isdigit():
                    sizes[name] = words[2]
            elif words[0] in ("read", "write") and len(words) >= 3 and words[2].isdigit():
                key = (words[1], int(words[2]))
                if words[0] == "read" and key not in written:
                    pages.setdefault(words[1], set()).add(key[1])
                written.add(key)
    out = [header(["trace_fill"] + argv)]
    for name in order:
        if not pages[name]:
            continue
        out.append(f"open {name} {sizes[name]} random\n" if name in sizes else f"open {name} random\n")
        out += [f"write {name} {p}\n" for p in sorted(pages[name])]
        out.append(f"sync {name}\nclose {name}\n")
    sys.stdout.write("".join(out))


def trace_prefix(argv):
    if len(argv) != 2:
        sys.exit("util.py trace_prefix TRACE OPS")
    limit = int(argv[1])
    kept = total = 0
    with open(argv[0]) as f:
        for line in f:
            words = operation(line)
            page_op = bool(words) and words[0] in ("read", "write")
            total += page_op
            if kept < limit:
                sys.stdout.write(line)
                kept += page_op
    print(f"{kept} {total}", file=sys.stderr)


COMMANDS = {"hitmix": hitmix, "warm": warm, "strided": strided, "evict": evict, "rusage": rusage,
            "io_read_kib": io_read_kib, "trace_prefix": trace_prefix,
            "trace_fill": trace_fill}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](sys.argv[2:])
