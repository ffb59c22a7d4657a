"""README.md's Layout section matches the tree: every top-level folder it
names exists, and every top-level folder that builds code (holds a
meson.build) or that the project keeps (doc/, scripts/, bench/,
subprojects/) is named there.

usage: readme_layout_test.py SOURCE_ROOT
"""
import pathlib
import re
import sys

from report import report

# Folders of the tree that hold no meson.build but belong in the map.
ALWAYS = {"bench", "doc", "scripts", "subprojects", "include"}


def layout_folders(readme):
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if not section:
        return None
    block = re.search(r"```\n(.*?)```", section.group(1), re.S)
    if not block:
        return None
    folders = []
    for line in block.group(1).splitlines():
        m = re.match(r"([\w.-]+)/", line)
        if m:
            folders.append(m.group(1))
    return folders


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = pathlib.Path(sys.argv[1])
    named = layout_folders((root / "README.md").read_text())
    failures = []
    cases = 1
    if named is None:
        failures.append("README.md has no '## Layout' section with a code block of folders")
        named = []
    for folder in named:
        cases += 1
        if not (root / folder).is_dir():
            failures.append(f"README.md's Layout names {folder}/, which does not exist")
    for path in sorted(root.iterdir()):
        if not path.is_dir() or path.name.startswith(".") or path.name.startswith("build"):
            continue
        if (path / "meson.build").exists() or path.name in ALWAYS:
            cases += 1
            if path.name not in named:
                failures.append(f"{path.name}/ is missing from README.md's Layout")
    return report(cases, failures)


if __name__ == "__main__":
    sys.exit(main())
