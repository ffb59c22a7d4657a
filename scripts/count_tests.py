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

passed = failed = skipped = 0
for path in sys.argv[1:]:
    with open(path) as log:
        for line in log:
            result = json.loads(line)
            outcome = result["result"]
            if outcome == "SKIP":
                skipped += 1
                continue
            match = SUMMARY.search(result.get("stdout", "") or "")
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
