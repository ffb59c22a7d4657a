#!/usr/bin/env python3
"""Sums the results of meson test runs into one line: "N passed, N failed".

Each meson test is a doctest executable holding many test cases; the line
counts test cases (from doctest's own summary). A test that crashed before
its summary, or failed although its cases passed (a sanitizer report at
exit), counts as one failure. A test that exited 77 counts as skipped.
"""
import json
import re
import sys

SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
TCL_FILE = re.compile(r"^tcl-test \S+: unix (passed|failed|timed out)\b.*, pagefile (passed|failed|timed out|skipped)\b",
                      re.MULTILINE)


def count_tcl_files(stdout):
    """(passed, failed, skipped) over run-tcl-tests' per-file lines."""
    counts = [0, 0, 0]
    for unix, pagefile in TCL_FILE.findall(stdout):
        if pagefile == "passed":
            counts[0] += 1
        elif unix == "passed" and pagefile != "skipped":
            counts[1] += 1
        else:
            counts[2] += 1
    return counts

passed = failed = skipped = 0
for path in sys.argv[1:]:
    with open(path) as log:
        for line in log:
            result = json.loads(line)
            outcome = result["result"]
            stdout = result.get("stdout", "") or ""
            tcl = count_tcl_files(stdout)
            if any(tcl):
                passed += tcl[0]
                failed += tcl[1]
                skipped += tcl[2]
                # A failing run whose files all passed still failed (a
                # crash of the runner, servers that did not start).
                if outcome not in ("OK", "EXPECTEDFAIL", "SKIP") and tcl[1] == 0:
                    failed += 1
                continue
            if outcome == "SKIP":
                skipped += 1
                continue
            match = SUMMARY.search(stdout)
            ok = outcome in ("OK", "EXPECTEDFAIL")
            if match:
                passed += int(match.group(2))
                failed += int(match.group(3))
                if not ok and int(match.group(3)) == 0:
                    failed += 1
            elif ok:
                passed += 1
            else:
                failed += 1
line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
