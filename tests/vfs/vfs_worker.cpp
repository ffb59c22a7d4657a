// A second (or third) SQLite client for the multi-process VFS tests.
//   vfs_worker URI insert TAG N   N transactions, each inserting (TAG, i)
//   vfs_worker URI hold           a big transaction that spills to the
//                                 database, then "spilled" and wait to be killed
// Exits 0 on success, 1 with the error on stderr.
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "pagefile/pagefile_vfs.h"

namespace {

int fail(sqlite3* db, const char* what) {
  std::fprintf(stderr, "vfs_worker: %s: %s (%d)\n", what, sqlite3_errmsg(db), sqlite3_extended_errcode(db));
  return 1;
}

bool exec(sqlite3* db, const std::string& sql) { return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: vfs_worker URI insert TAG N | vfs_worker URI hold\n");
    return 2;
  }
  if (sqlite3_pagefile_register(0) != SQLITE_OK) return 1;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "pagefile") !=
      SQLITE_OK) {
    return fail(db, "open");
  }
  sqlite3_busy_timeout(db, 30000);
  std::string mode = argv[2];
  if (mode == "insert" && argc == 5) {
    int n = std::atoi(argv[4]);
    for (int i = 1; i <= n; ++i) {
      std::string sql = "BEGIN IMMEDIATE; INSERT INTO t(tag, i, pad) VALUES('" + std::string(argv[3]) + "', " +
                        std::to_string(i) + ", randomblob(700)); COMMIT;";
      if (!exec(db, sql)) {
        exec(db, "ROLLBACK");
        return fail(db, "insert");
      }
    }
  } else if (mode == "hold") {
    if (!exec(db, "PRAGMA cache_size=5; BEGIN; INSERT INTO t(tag, i, pad) SELECT 'lost', value, randomblob(3000) "
                  "FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 2000) "
                  "SELECT value FROM s); UPDATE t SET pad = randomblob(800) WHERE tag = 'kept';")) {
      return fail(db, "hold");
    }
    std::printf("spilled\n");
    std::fflush(stdout);
    for (;;) ::pause();
  } else {
    std::fprintf(stderr, "vfs_worker: unknown mode %s\n", mode.c_str());
    return 2;
  }
  sqlite3_close(db);
  return 0;
}
