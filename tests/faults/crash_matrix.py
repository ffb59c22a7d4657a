#!/usr/bin/python3
"""The crash matrix: SQLite writers on pagefiled processes, and faults at
random moments. For each fault, trials of: a writer (vfs_worker log) running
transactions of three rows each, printing "committed i" once a COMMIT
returned; the fault; then, with everything running again, a check through
the pagefile VFS that every committed transaction is there whole, no
transaction is there in part, and PRAGMA integrity_check is ok.

  writer-kill     SIGKILL the writer
  local-kill      SIGKILL a writer of a local database (the default, no
                  bus) with PRAGMA synchronous=OFF, whose promise is that a
                  crash of the process loses nothing committed
  local-wal-kill  the same in WAL mode: the kill may strike mid-commit or
                  mid-checkpoint, and the -wal and -shm stay behind
  server-kill     SIGKILL a page server (not the catalog), start it again
  catalog-kill    SIGKILL the catalog's server, start it again
  writer-stop     SIGSTOP the writer past its lease while a second writer
                  commits, then SIGCONT it
  server-freeze   SIGSTOP a page server for 2 s, then SIGCONT it

A writer that neither finishes nor fails within 60 s of the fault is stuck.
Prints one table row per fault (fault, trials, committed, lost, stuck,
broken: the database failed its check) and exits 1 unless lost, stuck and
broken are all 0. Every server listens on loopback; every process started
here is stopped by its pid.

usage: crash_matrix.py --build DIR [--trials N] [--seed S] [--markdown FILE]
"""
import argparse
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

LEASE_MS = 600
FAULTS = ["writer-kill", "local-kill", "local-wal-kill", "server-kill", "catalog-kill", "writer-stop", "server-freeze"]


def free_port(taken=()):
    """A free port below the kernel's ephemeral range, none of `taken`. A
    server here is killed and started again on its port; a port from that
    range may be taken meanwhile as the source port of some connection (a
    client that keeps reconnecting to the dead server can even connect to
    itself on it), and the server then cannot start again."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12000), low)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


class Server:
    def __init__(self, pagefiled, directory, port):
        self.pagefiled, self.directory, self.port = pagefiled, directory, port
        self.proc = None

    def start(self, taken=None):
        """Started on its port; the first time (`taken`: the ports of the
        trial's other servers), on another free one if something else took
        its port since free_port found it free (another test's server)."""
        why = ""
        for _ in range(50):  # the port may linger a moment after a kill
            self.proc = subprocess.Popen(
                [self.pagefiled, "--listen", f"tcp://127.0.0.1:{self.port}", "--dir", self.directory,
                 "--lease-ms", str(LEASE_MS)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = self.proc.stdout.readline()
            if "listening" in line:
                return
            self.proc.wait()
            why = self.proc.stderr.read().strip()
            if taken is not None and "address in use" in why:
                self.port = free_port(taken)
                continue
            time.sleep(0.1)
        raise RuntimeError(f"pagefiled on port {self.port} did not start: {why}")

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self):
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def stop(self):
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if self.proc:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


class Writer:
    def __init__(self, worker, uri, tag, count, directory, mode="log"):
        self.out_path = os.path.join(directory, f"{tag}.out")
        self.out = open(self.out_path, "w")
        self.proc = subprocess.Popen([worker, uri, mode, tag, str(count)], stdout=self.out,
                                     stderr=subprocess.STDOUT)

    def committed(self):
        with open(self.out_path) as f:
            return {int(m.group(1)) for m in re.finditer(r"committed (\d+)", f.read())}

    def wait(self, seconds):
        """True when it ended (either way) within `seconds`."""
        try:
            self.proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def end(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.out.close()


def connect(extension, uri):
    """A connection to `uri` through the pagefile VFS (loaded once)."""
    if not getattr(connect, "loaded", False):
        db = sqlite3.connect(":memory:")
        db.enable_load_extension(True)
        db.load_extension(extension)
        db.close()
        connect.loaded = True
    return sqlite3.connect(uri, uri=True, timeout=20, isolation_level=None)


def in_own_process(args, what, uri):
    out = subprocess.run([sys.executable, __file__, "--build", args.build, "--" + what, uri], capture_output=True,
                         text=True, timeout=120)
    sys.stderr.write(out.stderr)
    return out.stdout


def check(extension, uri):
    """Prints "ok tag:i:rows ..." for the database at `uri`, or "broken"
    when it fails its check or cannot be read."""
    error = None
    for attempt in range(40):  # the servers may still be coming back
        try:
            db = connect(extension, uri)
            verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
            if verdict != "ok":
                last = db.execute("PRAGMA pagefile_last_error").fetchone()[0]
                print(f"  {uri}: integrity_check: {verdict.splitlines()[:2]} ({last})", file=sys.stderr)
                print("broken")
                return
            rows = db.execute("SELECT tag, i, count(*) FROM t GROUP BY tag, i").fetchall()
            db.close()
            break
        except sqlite3.Error as e:
            error = f"{e}: {db.execute('PRAGMA pagefile_last_error').fetchone()[0] if 'db' in dir() else ''}"
            time.sleep(0.25)
    else:
        print(f"  {uri}: cannot check: {error}", file=sys.stderr)
        print("broken")
        return
    print("ok " + " ".join(f"{tag}:{i}:{n}" for tag, i, n in rows))


def trial(args, fault, n, rng, work):
    directory = os.path.join(work, f"{fault}-{n}")
    os.makedirs(directory)
    local = fault in ("local-kill", "local-wal-kill")
    servers = []
    for i in range(0 if local else 3):
        servers.append(Server(args.pagefiled, os.path.join(directory, f"s{i}"), free_port({s.port for s in servers})))
    writers = []
    try:
        for s in servers:
            s.start({other.port for other in servers if other is not s})
        bus = ",".join(f"tcp://127.0.0.1:{s.port}" for s in servers)
        uri = (f"file:{directory}/matrix.db?vfs=pagefile" if local
               else f"file:matrix.db?vfs=pagefile&bus={bus}&timeout_ms=2000")
        # In processes of their own, as a fresh client sees the database.
        in_own_process(args, "create", uri)
        mode = {"local-kill": "log-unsynced", "local-wal-kill": "log-wal-unsynced"}.get(fault, "log")
        writer = Writer(args.worker, uri, "w", 100000, directory, mode)
        writers.append(writer)
        time.sleep(rng.uniform(0.05, 0.5))
        if fault in ("writer-kill", "local-kill", "local-wal-kill"):
            writer.end()
        elif fault == "server-kill":
            servers[1].kill()
            time.sleep(0.2)
            servers[1].start()
        elif fault == "catalog-kill":
            servers[0].kill()
            time.sleep(0.2)
            servers[0].start()
        elif fault == "writer-stop":
            os.kill(writer.proc.pid, signal.SIGSTOP)
            time.sleep(LEASE_MS / 1000 * 2.5)
            other = Writer(args.worker, uri, "other", 3, directory)
            writers.append(other)
            if not other.wait(60):
                print("  the second writer did not finish", file=sys.stderr)
            os.kill(writer.proc.pid, signal.SIGCONT)
        elif fault == "server-freeze":
            servers[2].signal(signal.SIGSTOP)
            time.sleep(2)
            servers[2].signal(signal.SIGCONT)
        # Not stuck: it ends (an error is fine) or commits again within 60 s.
        stuck = 0
        for w in writers:
            before = len(w.committed())
            deadline = time.monotonic() + 60
            while w.proc.poll() is None and len(w.committed()) == before and time.monotonic() < deadline:
                time.sleep(0.05)
            if w.proc.poll() is None and len(w.committed()) == before:
                stuck += 1
        committed = {tag: w.committed() for tag, w in (("w", writer),) + ((("other", writers[1]),) if len(writers) > 1 else ())}
        for w in writers:
            w.end()
        counts = in_own_process(args, "check", uri).split()
        if counts[0] == "broken":
            return sum(len(c) for c in committed.values()), 0, stuck, 1
        present = {(tag, int(i)): int(n) for tag, i, n in (c.split(":") for c in counts[1:])}
        lost = sum(1 for tag, done in committed.items() for i in done if (tag, i) not in present)
        broken = any(n != 3 for n in present.values())
        if broken:
            print(f"  {uri}: a transaction in part", file=sys.stderr)
        return sum(len(c) for c in committed.values()), lost, stuck, broken
    finally:
        for w in writers:
            w.end()
        for s in servers:
            s.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--markdown")
    parser.add_argument("--create", help=argparse.SUPPRESS)  # URI: make the table (own process)
    parser.add_argument("--check", help=argparse.SUPPRESS)   # URI: check it (own process)
    args = parser.parse_args()
    args.pagefiled = os.path.join(args.build, "tools", "pagefiled")
    args.worker = os.path.join(args.build, "tests", "vfs", "vfs_worker")
    args.extension = os.path.join(args.build, "vfs", "pagefile")
    if args.create:
        connect(args.extension, args.create).execute(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, tag TEXT, i INTEGER, pad BLOB)")
        return 0
    if args.check:
        check(args.extension, args.check)
        return 0
    rng = random.Random(args.seed)
    rows = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="pagefile-matrix-") as work:
        for fault in args.faults.split(","):
            total = [0, 0, 0, 0]
            for n in range(args.trials):
                result = trial(args, fault, n, rng, work)
                total = [a + b for a, b in zip(total, result)]
            committed, lost, stuck, broken = total
            rows.append((fault, args.trials, committed, lost, stuck, broken))
            print(f"{fault:14} trials {args.trials:4}  committed {committed:6}  lost {lost}  stuck {stuck}  "
                  f"broken {broken}", flush=True)
            failed |= lost > 0 or stuck > 0 or broken > 0
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| fault | trials | transactions committed | transactions lost | client stuck | database broken |\n")
            f.write("| --- | --- | --- | --- | --- | --- |\n")
            for row in rows:
                f.write("| " + " | ".join(str(x) for x in row) + " |\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
