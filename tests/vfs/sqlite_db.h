// A small RAII handle on an SQLite connection for the VFS tests.
#pragma once

#include <sqlite3.h>

#include <string>

#include <doctest/doctest.h>

namespace pagefile::test {

class SqliteDb {
 public:
  // Opens `uri` (a file: URI or a plain name) with `vfs` (null: default).
  explicit SqliteDb(const std::string& uri, const char* vfs = "pagefile",
                    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI) {
    rc_ = sqlite3_open_v2(uri.c_str(), &db_, flags, vfs);
  }
  ~SqliteDb() { sqlite3_close_v2(db_); }
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  int open_rc() const { return rc_; }
  sqlite3* get() const { return db_; }
  std::string error() const { return db_ ? sqlite3_errmsg(db_) : "no connection"; }

  // Runs `sql`; returns SQLite's code (the extended one).
  int exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    last_error_ = err ? err : "";
    sqlite3_free(err);
    return rc == SQLITE_OK ? rc : sqlite3_extended_errcode(db_);
  }
  // REQUIREs that `sql` succeeds.
  void run(const std::string& sql) {
    int rc = exec(sql);
    INFO(sql, ": ", last_error_);
    REQUIRE(rc == SQLITE_OK);
  }
  // Every row of `sql`, columns joined by '|', rows by '\n'.
  std::string query(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
    INFO(sql, ": ", error());
    REQUIRE(rc == SQLITE_OK);
    std::string out;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!out.empty()) out += '\n';
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        if (i > 0) out += '|';
        const unsigned char* text = sqlite3_column_text(stmt, i);
        out += text ? reinterpret_cast<const char*>(text) : "NULL";
      }
    }
    last_rc_ = rc == SQLITE_DONE ? SQLITE_OK : sqlite3_extended_errcode(db_);
    sqlite3_finalize(stmt);
    return out;
  }
  int last_query_rc() const { return last_rc_; }
  const std::string& last_error() const { return last_error_; }

 private:
  sqlite3* db_ = nullptr;
  int rc_ = SQLITE_ERROR;
  int last_rc_ = SQLITE_OK;
  std::string last_error_;
};

// Opens `uri` with the pagefile VFS and runs `sql` on it, REQUIRing both to
// succeed.
inline void run_on(const std::string& uri, const std::string& sql) {
  SqliteDb db(uri);
  REQUIRE(db.open_rc() == SQLITE_OK);
  db.run(sql);
}

}  // namespace pagefile::test
