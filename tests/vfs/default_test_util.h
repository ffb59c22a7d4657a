// Helpers of the default VFS's tests (default_test.cpp, default_wal_test.cpp):
// databases with a counter, what a user sees of one, and worker processes.
#pragma once

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/support/temp_dir.h"
#include "tests/vfs/sqlite_db.h"
#include "tests/vfs/worker.h"

namespace pagefile::test {

inline std::string uri(const std::filesystem::path& path, const std::string& vfs, const std::string& more = "") {
  return fmt::format("file:{}?vfs={}{}", path.string(), vfs, more);
}

// A counter c(n) at 0 and a table t, in `journal_mode`.
inline void create_counter(const std::string& db_uri, const std::string& journal_mode) {
  SqliteDb db(db_uri, nullptr);
  REQUIRE(db.open_rc() == SQLITE_OK);
  CHECK(db.query("PRAGMA journal_mode=" + journal_mode) == journal_mode);
  db.run("CREATE TABLE c(n INTEGER); INSERT INTO c VALUES(0);"
         "CREATE TABLE t(id INTEGER PRIMARY KEY, tag TEXT, i INTEGER, pad BLOB)");
}

// A new database at `path` under `vfs` holding the tables of
// create_counter, in `journal_mode`: its URI.
inline std::string new_counter_db(const std::filesystem::path& path, const std::string& journal_mode, const std::string& vfs = "pagefile") {
  std::string db_uri = uri(path, vfs);
  create_counter(db_uri, journal_mode);
  return db_uri;
}

inline std::string counter(const std::string& db_uri) {
  SqliteDb db(db_uri, nullptr);
  REQUIRE(db.open_rc() == SQLITE_OK);
  CHECK(db.query("PRAGMA integrity_check") == "ok");
  return db.query("SELECT n FROM c");
}

// What a user sees of `db_uri` opened with `flags`: the open's code, then
// the codes of a write and of a read.
inline std::string answers(const std::string& db_uri, int flags) {
  SqliteDb db(db_uri, nullptr, flags | SQLITE_OPEN_URI);
  if (db.open_rc() != SQLITE_OK) return fmt::format("open={}", db.open_rc());
  int write = db.exec("CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES(1)");
  int read = db.exec("SELECT count(*) FROM sqlite_master");
  return fmt::format("open=0 write={} read={}", write, read);
}

// Runs `n` vfs_worker processes with `args` at once (outputs in
// dir/wN.txt); each must exit 0.
inline void run_together(const TempDir& dir, int n, const std::vector<std::string>& args) {
  std::vector<pid_t> workers;
  for (int w = 0; w < n; ++w) workers.push_back(start_worker(dir / fmt::format("w{}.txt", w), args));
  for (pid_t pid : workers) CHECK(wait_worker(pid) == 0);
}

}  // namespace pagefile::test
