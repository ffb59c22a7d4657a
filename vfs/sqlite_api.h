// How the VFS reaches SQLite.
//
// The same sources build twice (vfs/meson.build): as the loadable extension
// pagefile.so, where every sqlite3_* call must go through the routines the
// HOST hands to sqlite3_pagefile_init (a testfixture with its own static
// SQLite may load it), and as a static library for programs that link
// SQLite themselves. PAGEFILE_VFS_LOADABLE picks the first.
#pragma once

#ifdef PAGEFILE_VFS_LOADABLE
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3
#else
#include <sqlite3.h>
#endif
