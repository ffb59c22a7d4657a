"""Loading the pagefile VFS into Python's sqlite3, the options that say how,
and running a script's main, for the bench scripts.

    from pagefile_extension import add_sqlite_options, load_pagefile, run_main
    load_pagefile("build/vfs/pagefile.so")

Needs Debian's /usr/bin/python3: its sqlite3 module can load extensions
(enable_load_extension); the pyenv Python first on some PATHs cannot.
"""
import sqlite3
import sys


def add_sqlite_options(parser, extension_required=False):
    """Adds the options the SQLite bench scripts share: --extension (the
    pagefile.so to load), --journal-mode (default delete) and --synchronous
    (default: SQLite's, FULL)."""
    parser.add_argument("--extension", required=extension_required, help="pagefile.so")
    parser.add_argument("--journal-mode", default="delete")
    parser.add_argument("--synchronous", default="", help="PRAGMA synchronous (default: SQLite's, FULL)")


def load_pagefile(extension):
    """Registers the VFS in this process (no-op for a false `extension`).

    The extension registers the VFS process-wide and stays
    (SQLITE_OK_LOAD_PERMANENTLY); the connection made here only carries the
    load. Debian's Python has no entrypoint=: SQLite derives
    sqlite3_pagefile_init from the file name pagefile.so.
    """
    if not extension:
        return
    loader = sqlite3.connect(":memory:")
    loader.enable_load_extension(True)
    loader.load_extension(extension)
    loader.close()


def run_main(main, name):
    """Runs a script's `main`; an SQLite error ends the script with one line,
    "NAME: error", and exit status 1 rather than a traceback."""
    try:
        main()
    except sqlite3.Error as error:
        sys.exit(f"{name}: {error}")
