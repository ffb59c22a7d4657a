"""The end of every architecture test: its failures, one per line, and a
summary line in doctest's form, which scripts/count_tests.py adds up."""


def report(cases, failures):
    """Prints `failures` and the summary; returns the exit status."""
    for line in failures:
        print(line)
    bad = len(failures)
    print(f"[doctest] test cases: {cases} | {max(cases - bad, 0)} passed | {bad} failed")
    return 1 if failures else 0
