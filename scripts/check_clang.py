#!/usr/bin/env python3
"""Clang's checks over the project's own sources, without building them.

Usage: check_clang.py BUILD_DIR [JOBS]

BUILD_DIR is a meson build directory configured with clang++ and
-Wthread-safety -Werror (scripts/run sets one up). Every translation unit of
the libraries and tools in its compile_commands.json is compiled with
-fsyntax-only: clang's thread-safety analysis, like its other warnings, runs
while it checks the code, so no object is needed to find a breach, and code
generation (two thirds of a clang compile at -O2) is skipped. Tests are left
out as the build did before: they hold no annotated member.

Exit status 1, with clang's messages, when any unit fails.
"""
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys


def syntax_only(argv):
    """argv of a compile command, with its outputs (-o, -MD/-MQ/-MF) dropped."""
    out = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("-o", "-MQ", "-MF", "-MT"):
            skip = True
            continue
        if arg in ("-MD", "-MMD", "-c"):
            continue
        out.append(arg)
    return out + ["-fsyntax-only", "-fno-color-diagnostics"]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    build = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) == 3 else os.cpu_count() or 1
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    units = []
    for e in entries:
        source = os.path.normpath(os.path.join(e["directory"], e["file"]))
        rel = os.path.relpath(source, os.path.dirname(os.path.abspath(build)))
        # Generated code (the Cap'n Proto schema), wraps' sources and tests
        # are not ours to check.
        if rel.startswith(("tests" + os.sep, "subprojects" + os.sep, "..")) or os.path.commonpath(
                [source, os.path.abspath(build)]) == os.path.abspath(build):
            continue
        argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        # A directory set up with other flags would pass with nothing checked.
        missing = [f for f in ("-Wthread-safety", "-Werror") if f not in argv]
        if missing:
            sys.exit(f"{build}: {rel} is compiled without {' '.join(missing)}: set it up as scripts/run does")
        units.append((rel, e["directory"], syntax_only(argv)))
    if not units:
        sys.exit(f"{build}: no translation unit to check")

    def check(unit):
        rel, cwd, argv = unit
        r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        return rel, r.returncode, r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for rel, rc, err in pool.map(check, sorted(units)):
            if rc != 0:
                failed += 1
                sys.stderr.write(f"clang: {rel} failed\n{err}")
    print(f"clang -fsyntax-only -Wthread-safety: {len(units)} units, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
