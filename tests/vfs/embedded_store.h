// The store of a VFS test process: the in-process cluster (inproc:4, the
// embedded default bus) under a scratch PAGEFILE_HOME, named in
// PAGEFILE_BUS before the VFS starts its client, so that a database with
// no location= goes there (without a bus it would be a local file).
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <doctest/doctest.h>

#include "tests/support/temp_dir.h"
#include "pagefile/pagefile_vfs.h"

namespace pagefile::test {

struct EmbeddedStore {
  TempDir home;
  EmbeddedStore() {
    ::setenv("PAGEFILE_HOME", home.path().c_str(), 1);
    ::setenv("PAGEFILE_BUS", "inproc:4", 1);
    ::unsetenv("PAGEFILE_VFS_DEFAULT");
    REQUIRE(sqlite3_pagefile_register(0) == SQLITE_OK);
  }
};

// The VFS registered (once) with no bus configured: no PAGEFILE_BUS, so a
// database without bus= is a local Pagefile at its path, in this process
// and in the workers it starts.
inline void register_without_bus() {
  static bool done = [] {
    ::unsetenv("PAGEFILE_BUS");
    ::unsetenv("PAGEFILE_VFS_DEFAULT");
    REQUIRE(sqlite3_pagefile_register(0) == SQLITE_OK);
    return true;
  }();
  (void)done;
}

// The process's one store, made on first use.
inline EmbeddedStore& store() {
  static EmbeddedStore s;
  return s;
}

}  // namespace pagefile::test
