// The entry points: sqlite3_pagefile_init for sqlite3_load_extension (the
// .so), sqlite3_pagefile_register for programs linking the static library.
#include <cstdlib>
#include <cstring>

#include "pagefile/pagefile_vfs.h"
#include "vfs/vfs_internal.h"

#ifdef PAGEFILE_VFS_LOADABLE
SQLITE_EXTENSION_INIT1
#endif

namespace {

// PAGEFILE_VFS_DEFAULT=1 makes "pagefile" SQLite's default VFS.
bool default_from_environment() {
  const char* v = std::getenv("PAGEFILE_VFS_DEFAULT");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

extern "C" int sqlite3_pagefile_register(int make_default) {
  return pagefile::vfs::register_vfs(make_default != 0 || default_from_environment() ? 1 : 0);
}

// SQLite's test harness (tests/sqlite/pagefile_test_init.c) hands over the
// counters its test build of os_unix.c counts fsyncs in, so that tests
// counting syncs count this VFS's (vfs_internal.h, set_sync_counters).
extern "C" __attribute__((visibility("default"))) void pagefile_test_sync_counters(int* syncs, int* full_syncs) {
  pagefile::vfs::set_sync_counters(syncs, full_syncs);
}

#ifdef PAGEFILE_VFS_LOADABLE
extern "C" __attribute__((visibility("default"))) int sqlite3_pagefile_init(sqlite3* db, char** error,
                                                                            const sqlite3_api_routines* api) {
  SQLITE_EXTENSION_INIT2(api);
  int rc = sqlite3_pagefile_register(0);
  if (rc == SQLITE_OK && db != nullptr) rc = pagefile::vfs::register_sql_functions(db);
  if (rc != SQLITE_OK) {
    if (error) *error = sqlite3_mprintf("pagefile: registering the VFS failed (%d)", rc);
    return rc;
  }
  // The VFS must outlive this connection: never unload the library.
  return SQLITE_OK_LOAD_PERMANENTLY;
}
#endif
