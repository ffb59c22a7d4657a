"""Every header of include/pagefile/ is the whole public API of its part: it
compiles on its own, with no include path but include/, included twice in
one translation unit (its include guard works), warnings as errors; the C
entry point (pagefile_vfs.h) also as C. A header that reaches for a private
header (core/, wire/, ...) fails here, since only include/ is on the path.

usage: public_headers_test.py SOURCE_ROOT CXX... -- CC...
"""
import pathlib
import subprocess
import sys
import tempfile

from report import report

# Headers a C program includes, besides C++ users.
C_HEADERS = {"pagefile_vfs.h"}


def compile_alone(compiler, language, header, include_dir, work):
    source = work / f"{header.stem}_alone.{'c' if language == 'c' else 'cpp'}"
    source.write_text(f'#include "pagefile/{header.name}"\n#include "pagefile/{header.name}"\n'
                      "int pagefile_header_compiles_alone;\n")
    std = "-std=c11" if language == "c" else "-std=c++20"
    command = compiler + [std, "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{include_dir}", str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.returncode == 0, done.stderr.strip()


def main():
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else -1
    if split < 2 or split == len(args) - 1:
        print(__doc__)
        return 2
    root = pathlib.Path(args[0])
    cxx, cc = args[1:split], args[split + 1:]
    include_dir = root / "include"
    headers = sorted((include_dir / "pagefile").glob("*.h"))
    failures = []
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for header in headers:
            languages = ["c++"] + (["c"] if header.name in C_HEADERS else [])
            for language in languages:
                cases += 1
                ok, errors = compile_alone(cxx if language == "c++" else cc, language, header, include_dir, work)
                if not ok:
                    failures.append(f"include/pagefile/{header.name} does not compile alone as {language}:\n{errors}")
    if not headers:
        failures.append("include/pagefile/ holds no headers")
        cases += 1
    return report(cases, failures)


if __name__ == "__main__":
    sys.exit(main())
