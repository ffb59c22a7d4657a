#!/usr/bin/env python3
"""The folders of the source tree form one chain, each layer looking only down.

doc/architecture.md draws the chain; this test holds the code to it. A file
in a layer may include the public headers (include/pagefile/), its own
layer's headers and those of the layers below, never a layer above. Two
folders that include each other fail whatever their order. Tests, benchmarks
and subprojects are not layers: they may include anything.

Run as: layers_test.py SOURCE_ROOT. Prints one line per violation and exits
1 if there is any; prints doctest's summary line so scripts/count_tests.py
counts its checks.
"""
import pathlib
import re
import sys

from report import report

# Bottom to top. The public API (include/pagefile) sits under all of them and
# may include only itself.
LAYERS = ["core", "policies", "store", "wire", "server", "bus", "client", "vfs", "tools"]
PUBLIC = "include/pagefile"
SOURCES = (".h", ".cpp", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.MULTILINE)


def folder_of_include(target):
    """The layer (or 'public') an include path names, or None for a system header."""
    head = target.split("/", 1)[0]
    if head == "pagefile":
        return "public"
    return head if head in LAYERS else None


def main():
    root = pathlib.Path(sys.argv[1])
    rank = {name: i for i, name in enumerate(LAYERS)}
    edges = {}  # (from layer, to layer) -> first file seen
    failures = []
    files = 0
    missing = [name for name in LAYERS + [PUBLIC] if not (root / name).is_dir()]
    for name in missing:
        failures.append(f"layer folder {name}/ does not exist")
    for layer in [PUBLIC] + LAYERS:
        for path in sorted((root / layer).rglob("*")):
            if path.suffix not in SOURCES:
                continue
            rel = path.relative_to(root)
            files += 1
            for target in INCLUDE.findall(path.read_text(errors="replace")):
                to = folder_of_include(target)
                if to is None:
                    continue
                if layer == PUBLIC:
                    if to != "public":
                        failures.append(f"{rel}: public header includes private {target}")
                    continue
                if to == "public" or to == layer:
                    continue
                edges.setdefault((layer, to), str(rel))
                if rank[to] > rank[layer]:
                    failures.append(f"{rel}: {layer}/ includes {target} from {to}/, a layer above it")
    for (a, b), where in sorted(edges.items()):
        if (b, a) in edges and a < b:
            failures.append(f"{a}/ and {b}/ include each other ({where}, {edges[(b, a)]})")
    # One case per file read and per folder that must exist.
    cases = files + len(LAYERS) + 1
    return report(cases, failures)


if __name__ == "__main__":
    sys.exit(main())
