// The VFS in one process, linked statically with Debian's SQLite, on the
// embedded bus (4 in-process servers) and on local Pagefiles: names, bytes
// onto pages, journals, SQL functions, concurrency and placement (locks,
// controls, WAL and errors in vfs_wal_and_controls_test.cpp). Each case
// names the line of shared/notes/sqlite-vfs.md it checks.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/page_io.h"
#include "vfs/byte_file.h"
#include "vfs/db_options.h"

#include "tests/support/temp_dir.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/vfs_test_util.h"
#include "tests/vfs/sqlite_db.h"
#include "pagefile/pagefile_vfs.h"

using namespace pagefile::test;

TEST_CASE("store names: a normal path is its own name, others are made normal; a relative one is made absolute") {
  using pagefile::vfs::store_name;
  // (Run before any bus is configured: the process's databases are local,
  // and a relative name's store name is its absolute path, as on unix.
  // doctest runs the files in name order: this, the first case of
  // vfs_test.cpp, runs before vfs_wal_and_controls_test.cpp's.)
  REQUIRE(std::getenv("PAGEFILE_BUS") == nullptr);
  auto absolute = [](std::string want) {
    if (want.front() == '/') return want;
    std::string made = (std::filesystem::current_path() / want).lexically_normal().string();
    if (made.size() > 1 && made.back() == '/') made.pop_back();
    return made;
  };
  for (const char* same : {"/a/b.db", "a/b.db", "b.db", "/b.db", "../b.db", "a/.hidden/b.db", "/a/b.db-journal"}) {
    auto name = store_name(same);
    REQUIRE(name);
    CHECK(*name == absolute(same));
  }
  const std::pair<const char*, const char*> made[] = {
      {"/a//b.db", "/a/b.db"}, {"/a/./b.db", "/a/b.db"}, {"/a/c/../b.db", "/a/b.db"}, {"./b.db", "b.db"},
      {"a/b/", "a/b"}, {"../../b.db", "../../b.db"}, {"a/../../b.db", "../b.db"}, {"//b.db", "/b.db"}, {"/", "/"}};
  for (auto [path, want] : made) {
    auto name = store_name(path);
    REQUIRE(name);
    CHECK(*name == absolute(want));
  }
  CHECK(store_name("").status().is(pagefile::Code::kInvalidArgument));
  CHECK(store_name(".").status().is(pagefile::Code::kInvalidArgument));
  auto above = store_name("/../b.db");  // "/.." is "/", as on unix
  REQUIRE(above);
  CHECK(*above == "/b.db");
}

TEST_CASE("registration: VFS 'pagefile' exists and is not the default") {
  REQUIRE(vfs() != nullptr);
  CHECK(std::string(sqlite3_vfs_find(nullptr)->zName) != "pagefile");
  CHECK(sqlite3_pagefile_register(0) == SQLITE_OK);  // again: harmless
  CHECK(vfs()->iVersion == 2);
  CHECK((vfs()->xCurrentTimeInt64 != nullptr));
}

TEST_CASE("reading and writing: arbitrary offsets and amounts map onto pages (journal layout)") {
  std::string db = fresh("bytes");
  RawFile f(db, SQLITE_OPEN_MAIN_JOURNAL);
  REQUIRE(f.rc == SQLITE_OK);
  CHECK(f.size() == 0);
  // Journal-like odd sizes: a 28-byte header, then records of 4 + 4096 + 4.
  std::string header = pattern(28, 'h');
  REQUIRE(f.write(header, 0) == SQLITE_OK);
  CHECK(f.size() == 28);
  std::string all = header;
  for (int r = 0; r < 9; ++r) {
    std::string record = pattern(4104, static_cast<char>('a' + r));
    REQUIRE(f.write(record, static_cast<int64_t>(all.size())) == SQLITE_OK);
    all += record;
    CHECK(f.size() == static_cast<int64_t>(all.size()));  // while writes are in flight
  }
  CHECK(f.read(100, 0) == all.substr(0, 100));
  CHECK(f.read(16, 24) == all.substr(24, 16));
  // Spans across the 16 KiB pages of a journal.
  CHECK(f.read(20000, 10000) == all.substr(10000, 20000));
  CHECK(f.read(1, 16383) == all.substr(16383, 1));
  // Overwrite across a page boundary, then read the whole thing.
  std::string patch = pattern(5000, 'p');
  REQUIRE(f.write(patch, 15000) == SQLITE_OK);
  all.replace(15000, 5000, patch);
  CHECK(f.read(static_cast<int>(all.size()), 0) == all);
  REQUIRE(f.m().xSync(f.file, SQLITE_SYNC_NORMAL) == SQLITE_OK);
}

TEST_CASE("reading: past end of file zero-fills and returns SQLITE_IOERR_SHORT_READ") {
  std::string db = fresh("short");
  RawFile f(db, SQLITE_OPEN_MAIN_JOURNAL);
  REQUIRE(f.rc == SQLITE_OK);
  REQUIRE(f.write(pattern(1000, 'z'), 0) == SQLITE_OK);
  int rc = 0;
  std::string got = f.read(600, 700, &rc);
  CHECK(rc == SQLITE_IOERR_SHORT_READ);
  CHECK(got.substr(0, 300) == pattern(1000, 'z').substr(700));
  CHECK(got.substr(300) == std::string(300, '\0'));
  got = f.read(64, 5000, &rc);
  CHECK(rc == SQLITE_IOERR_SHORT_READ);
  CHECK(got == std::string(64, '\0'));

  // A main database: whole pages, the same rule.
  RawFile d(fresh("shortdb"), SQLITE_OPEN_MAIN_DB);
  REQUIRE(d.rc == SQLITE_OK);
  got = d.read(100, 0, &rc);
  CHECK(rc == SQLITE_IOERR_SHORT_READ);
  CHECK(got == std::string(100, '\0'));
}

TEST_CASE("xWrite, xTruncate and xFileSize agree, in flight and after reopening") {
  std::string db = fresh("sizes");
  {
    RawFile f(db, SQLITE_OPEN_MAIN_JOURNAL);
    REQUIRE(f.rc == SQLITE_OK);
    REQUIRE(f.write(pattern(50000, 'q'), 0) == SQLITE_OK);
    CHECK(f.size() == 50000);
    REQUIRE(f.m().xTruncate(f.file, 20001) == SQLITE_OK);
    CHECK(f.size() == 20001);
    // Growing again: the bytes between the old end and the write are zeros.
    REQUIRE(f.write("end", 30000) == SQLITE_OK);
    CHECK(f.size() == 30003);
    CHECK(f.read(9999, 20001) == std::string(9999, '\0'));
    CHECK(f.read(1, 20000) == pattern(50000, 'q').substr(20000, 1));
    REQUIRE(f.m().xSync(f.file, SQLITE_SYNC_FULL) == SQLITE_OK);
    REQUIRE(f.write("tail", 30003) == SQLITE_OK);  // closed without sync: close records it
  }
  {
    RawFile f(db, SQLITE_OPEN_MAIN_JOURNAL, nullptr, 0, 0);
    REQUIRE(f.rc == SQLITE_OK);
    CHECK(f.size() == 30007);  // the exact length, not whole pages
    CHECK(f.read(7, 30000) == "endtail");
    REQUIRE(f.m().xTruncate(f.file, 0) == SQLITE_OK);
    CHECK(f.size() == 0);
  }
  // Empty: not "existing" for xAccess (as unix), but present for READWRITE.
  CHECK(access(db + "-journal") == 0);
  CHECK(access(db + "-journal", SQLITE_ACCESS_READWRITE) == 1);
}

TEST_CASE("a main database's pages land at page * page size, in the database's page size") {
  std::string db = fresh("pages");
  const char* params[] = {"page_size", "1024", nullptr};
  RawFile f(db, SQLITE_OPEN_MAIN_DB, params, 1);
  REQUIRE(f.rc == SQLITE_OK);
  CHECK(f.m().xSectorSize(f.file) == 1024);
  for (int p = 0; p < 40; ++p) REQUIRE(f.write(pattern(1024, static_cast<char>(p)), p * 1024) == SQLITE_OK);
  CHECK(f.size() == 40 * 1024);
  for (int p = 0; p < 40; ++p) CHECK(f.read(1024, p * 1024) == pattern(1024, static_cast<char>(p)));  // read ahead
  REQUIRE(f.m().xTruncate(f.file, 10 * 1024) == SQLITE_OK);
  CHECK(f.size() == 10 * 1024);
}

TEST_CASE("opening: a failed open leaves pMethods NULL; NULL names and temp files stay local") {
  RawFile missing(fresh("missing"), SQLITE_OPEN_MAIN_DB, nullptr, 0, 0);
  CHECK(missing.rc == SQLITE_CANTOPEN);
  CHECK(missing.file->pMethods == nullptr);

  const char* bad[] = {"concurrency", "0", nullptr};
  RawFile wrong(fresh("badparam"), SQLITE_OPEN_MAIN_DB, bad, 1);
  CHECK(wrong.rc == SQLITE_CANTOPEN);
  CHECK(wrong.file->pMethods == nullptr);

  // An anonymous temp file: the unix VFS's methods, not ours.
  std::vector<char> memory(static_cast<size_t>(vfs()->szOsFile));
  auto* file = reinterpret_cast<sqlite3_file*>(memory.data());
  int out = 0;
  REQUIRE(vfs()->xOpen(vfs(), nullptr, file,
                       SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                           SQLITE_OPEN_DELETEONCLOSE,
                       &out) == SQLITE_OK);
  RawFile ours(fresh("methods"), SQLITE_OPEN_MAIN_DB);
  REQUIRE(ours.rc == SQLITE_OK);
  CHECK(file->pMethods != ours.file->pMethods);
  CHECK(file->pMethods->xWrite(file, "temp", 4, 0) == SQLITE_OK);
  file->pMethods->xClose(file);

  // SQL temp tables, sorting and sub-journals work through it.
  SqliteDb conn(pagefile_uri(fresh("temps")));
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run("PRAGMA temp_store=FILE; CREATE TEMP TABLE t(x); INSERT INTO t SELECT value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 5000) SELECT value FROM s);"
           "CREATE TABLE m(x); BEGIN; INSERT INTO m VALUES(1); SAVEPOINT s; INSERT INTO m VALUES(2);"
           "ROLLBACK TO s; COMMIT;");
  CHECK(conn.query("SELECT count(*) FROM t; ") == "5000");
  CHECK(conn.query("SELECT group_concat(x) FROM m") == "1");
}

TEST_CASE("xDelete and xAccess are exact; names are normalised deterministically") {
  std::string db = fresh("names");
  char full[1100];
  // A relative name is made absolute, as the unix VFS makes it.
  const std::string cwd = std::filesystem::current_path().string();
  REQUIRE(vfs()->xFullPathname(vfs(), ("./a//b/../" + db).c_str(), sizeof full, full) == SQLITE_OK);
  CHECK(std::string(full) == cwd + "/a/" + db);
  REQUIRE(vfs()->xFullPathname(vfs(), "/x/./y/../z.db", sizeof full, full) == SQLITE_OK);
  CHECK(std::string(full) == "/x/z.db");
  REQUIRE(vfs()->xFullPathname(vfs(), "/../z.db", sizeof full, full) == SQLITE_OK);  // "/.." is "/", as on unix
  CHECK(std::string(full) == "/z.db");
  CHECK(vfs()->xFullPathname(vfs(), "abc", 3, full) == SQLITE_CANTOPEN);

  CHECK(access(db) == 0);
  CHECK(vfs()->xDelete(vfs(), db.c_str(), 0) == SQLITE_IOERR_DELETE_NOENT);
  {
    RawFile f(db, SQLITE_OPEN_MAIN_DB);
    REQUIRE(f.rc == SQLITE_OK);
    CHECK(access(db) == 0);  // empty
    CHECK(access(db, SQLITE_ACCESS_READ) == 1);
    REQUIRE(f.write(pattern(4096, 'e'), 0) == SQLITE_OK);
    REQUIRE(f.m().xSync(f.file, SQLITE_SYNC_NORMAL) == SQLITE_OK);
  }
  CHECK(access(db) == 1);
  // Its absolute name, as xFullPathname makes it, is the same file.
  REQUIRE(vfs()->xFullPathname(vfs(), db.c_str(), sizeof full, full) == SQLITE_OK);
  CHECK(std::string(full) == cwd + "/" + db);
  CHECK(access(full) == 1);
  CHECK(vfs()->xDelete(vfs(), full, 1) == SQLITE_OK);
  CHECK(access(db) == 0);
  CHECK(access(db, SQLITE_ACCESS_READWRITE) == 0);
  CHECK(vfs()->xDelete(vfs(), db.c_str(), 1) == SQLITE_IOERR_DELETE_NOENT);
}

TEST_CASE("SQL functions pagefile_exists, pagefile_size, pagefile_unlink reach the store") {
  std::string db = fresh("functions");
  SqliteDb conn(pagefile_uri(db));
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run("CREATE TABLE t(x); INSERT INTO t VALUES(randomblob(10000));");
  CHECK(conn.query(fmt::format("SELECT pagefile_exists('{0}'), pagefile_size('{0}')", db)) == "1|16384");
  CHECK(conn.query(fmt::format("SELECT pagefile_exists('{0}-journal'), pagefile_size('nothing-here.db')", db)) ==
        "0|NULL");
  SqliteDb other(fresh("other"));  // registered on every later connection too
  REQUIRE(other.open_rc() == SQLITE_OK);
  std::string copy = fresh("copy");
  other.run(fmt::format("VACUUM INTO 'file:{}?vfs=pagefile'", copy));
  CHECK(other.query(fmt::format("SELECT pagefile_unlink('{0}'), pagefile_unlink('{0}'), pagefile_exists('{0}')",
                                copy)) == "1|0|0");
  CHECK(other.exec("SELECT pagefile_size(NULL)") == SQLITE_ERROR);
  CHECK(other.last_error() == "pagefile: InvalidArgument: path: is NULL");
  // A path with a NUL in it is refused, not cut at the NUL into another
  // file's name ('<db>' followed by a NUL and more).
  std::string hex_db;
  for (unsigned char c : db) hex_db += fmt::format("{:02x}", c);
  for (const char* fn : {"pagefile_exists", "pagefile_size", "pagefile_read", "pagefile_unlink"}) {
    CAPTURE(fn);
    CHECK(other.exec(fmt::format("SELECT {}(CAST(x'{}00787878' AS TEXT))", fn, hex_db)) == SQLITE_ERROR);
    CHECK(other.last_error() == "pagefile: InvalidArgument: path: contains a NUL byte");
  }
  CHECK(conn.query(fmt::format("SELECT pagefile_exists('{}')", db)) == "1");
}

TEST_CASE("SQL functions pagefile_copy, pagefile_read, pagefile_write, pagefile_names: byte-exact") {
  std::string db = fresh("fn-copy");
  SqliteDb conn(pagefile_uri(db, "&page_size=8192"));
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run("PRAGMA page_size=8192; CREATE TABLE t(x); INSERT INTO t VALUES('hello');");
  std::string copy = fresh("fn-copy2");
  CHECK(conn.query(fmt::format("SELECT pagefile_copy('{0}', '{1}'), pagefile_size('{1}')", db, copy)) ==
        "16384|16384");
  CHECK(conn.query(fmt::format("SELECT pagefile_read('{0}') = pagefile_read('{1}')", db, copy)) == "1");
  CHECK(conn.query(fmt::format("SELECT pagefile_copy('{}-nothing', '{}')", db, copy)) == "NULL");
  // A journal-layout name keeps its exact odd size.
  CHECK(conn.query(fmt::format("SELECT pagefile_write('{0}-journal', 3, x'0102'), pagefile_size('{0}-journal'),"
                               " hex(pagefile_read('{0}-journal'))", copy)) == "2|5|0000000102");
  // The page size field, rewritten with the value it holds.
  CHECK(conn.query(fmt::format("SELECT pagefile_write('{0}', 16, x'2000'), hex(substr(pagefile_read('{0}'), 17, 2))",
                               copy)) == "2|2000");
  std::string names = conn.query("SELECT pagefile_names()");
  CHECK(names.find(copy + "\n") != std::string::npos);
  CHECK(names.find(copy + "-journal\n") != std::string::npos);
  CHECK(conn.query(fmt::format("SELECT pagefile_unlink('{}-journal')", copy)) == "1");
  SqliteDb reopened(pagefile_uri(copy));
  REQUIRE(reopened.open_rc() == SQLITE_OK);
  CHECK(reopened.query("SELECT x FROM t") == "hello");
}

TEST_CASE("workload: integrity_check after inserts, updates, deletes, indexes and VACUUM") {
  std::string db = fresh("workload");
  SqliteDb conn(pagefile_uri(db, "&concurrency=12&policy=random&cache_pages=64&placement=hash&stripe_pages=2"));
  INFO(conn.error());
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run("PRAGMA cache_size=20; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, w BLOB);"
           "CREATE INDEX tv ON t(v);"
           "INSERT INTO t(v, w) SELECT hex(randomblob(20)), randomblob(abs(random()) % 3000) "
           "  FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 3000) SELECT value FROM s);"
           "UPDATE t SET w = randomblob(5000) WHERE id % 7 = 0;"
           "DELETE FROM t WHERE id % 5 = 0;");
  CHECK(conn.query("PRAGMA integrity_check") == "ok");
  CHECK(conn.query("SELECT count(*) FROM t") == "2400");
  conn.run("VACUUM");
  CHECK(conn.query("PRAGMA integrity_check") == "ok");
  std::string sum = conn.query("SELECT sum(length(w)), count(*) FROM t");
  // A fresh connection (new client state) sees the same.
  SqliteDb again(pagefile_uri(db));
  CHECK(again.query("SELECT sum(length(w)), count(*) FROM t") == sum);
  CHECK(again.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE("journal modes: DELETE, PERSIST, TRUNCATE and rollback keep the data right") {
  for (const char* mode : {"DELETE", "PERSIST", "TRUNCATE"}) {
    CAPTURE(mode);
    std::string db = fresh("modes");
    SqliteDb conn(pagefile_uri(db));
    conn.run(fmt::format("PRAGMA journal_mode={}; CREATE TABLE t(x); INSERT INTO t VALUES(1),(2);", mode));
    conn.run("BEGIN; INSERT INTO t SELECT value FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 2000) SELECT value FROM s); DELETE FROM t WHERE x = 1; ROLLBACK;");
    CHECK(conn.query("SELECT group_concat(x) FROM t") == "1,2");
    CHECK(conn.query("PRAGMA integrity_check") == "ok");
    // Deleted or truncated: gone for xAccess; PERSIST keeps it (zeroed header).
    CHECK(access(db + "-journal") == (std::string(mode) == "PERSIST" ? 1 : 0));
    SqliteDb again(pagefile_uri(db));
    CHECK(again.query("SELECT group_concat(x) FROM t") == "1,2");
  }
}

TEST_CASE("a journal descriptor kept open sees another descriptor's writes once its database is locked afresh") {
  std::string db = fresh("stalejournal");
  RawFile main_db(db, SQLITE_OPEN_MAIN_DB);
  RawFile kept(db, SQLITE_OPEN_MAIN_JOURNAL);  // SQLite keeps it open across transactions
  REQUIRE(main_db.rc == SQLITE_OK);
  REQUIRE(kept.rc == SQLITE_OK);
  CHECK(kept.size() == 0);
  std::string hot = pattern(3000, 'j');
  {
    RawFile writer(db, SQLITE_OPEN_MAIN_JOURNAL);  // another connection's, left behind
    REQUIRE(writer.rc == SQLITE_OK);
    REQUIRE(writer.write(hot, 0) == SQLITE_OK);
    REQUIRE(writer.m().xSync(writer.file, SQLITE_SYNC_NORMAL) == SQLITE_OK);
  }
  // hasHotJournal: SHARED on the database, then one byte of the journal it holds.
  REQUIRE(main_db.m().xLock(main_db.file, SQLITE_LOCK_SHARED) == SQLITE_OK);
  CHECK(kept.size() == 3000);
  int rc = -1;
  CHECK(kept.read(1, 0, &rc) == hot.substr(0, 1));
  CHECK(rc == SQLITE_OK);
  CHECK(kept.read(3000, 0) == hot);
  REQUIRE(main_db.m().xUnlock(main_db.file, SQLITE_LOCK_NONE) == SQLITE_OK);
  {
    RawFile writer(db, SQLITE_OPEN_MAIN_JOURNAL, nullptr, 0, 0);
    REQUIRE(writer.rc == SQLITE_OK);
    REQUIRE(writer.m().xTruncate(writer.file, 0) == SQLITE_OK);
    REQUIRE(writer.m().xSync(writer.file, SQLITE_SYNC_NORMAL) == SQLITE_OK);
  }
  REQUIRE(main_db.m().xLock(main_db.file, SQLITE_LOCK_SHARED) == SQLITE_OK);
  CHECK(kept.size() == 0);
  REQUIRE(main_db.m().xUnlock(main_db.file, SQLITE_LOCK_NONE) == SQLITE_OK);
}

namespace {

// A shim over "pagefile" doing what SQLite's journal2.test asks of testvfs:
// it claims UNDELETABLE_WHEN_OPEN (pager_unlock asks the database file, and
// then keeps a TRUNCATE-mode journal open while unlocked) and can fail xDelete of journals.
struct UndeletableShim {
  static inline bool fail_delete = false;
  static inline sqlite3_io_methods methods{};
  sqlite3_vfs shim{};

  UndeletableShim() {
    shim = *vfs();
    shim.zName = "pagefile-undeletable";
    shim.pAppData = vfs();
    shim.xOpen = [](sqlite3_vfs* self, sqlite3_filename name, sqlite3_file* file, int flags, int* out) {
      auto* real = static_cast<sqlite3_vfs*>(self->pAppData);
      int rc = real->xOpen(real, name, file, flags, out);
      if (rc == SQLITE_OK && (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL)) != 0) {
        methods = *file->pMethods;
        methods.xDeviceCharacteristics = [](sqlite3_file*) { return SQLITE_IOCAP_UNDELETABLE_WHEN_OPEN; };
        file->pMethods = &methods;
      }
      return rc;
    };
    shim.xDelete = [](sqlite3_vfs* self, const char* name, int sync) {
      if (fail_delete) return SQLITE_IOERR_DELETE;
      auto* real = static_cast<sqlite3_vfs*>(self->pAppData);
      return real->xDelete(real, name, sync);
    };
    REQUIRE(sqlite3_vfs_register(&shim, 0) == SQLITE_OK);
  }
  ~UndeletableShim() { sqlite3_vfs_unregister(&shim); }
};

}  // namespace

TEST_CASE("journal2-1.7: a hot journal left by a failed delete is rolled back by a connection holding it open") {
  UndeletableShim shim;
  std::string db = fresh("journal2");
  std::string uri = "file:" + db + "?vfs=pagefile-undeletable";
  SqliteDb a(uri);
  a.run("CREATE TABLE t1(a, b); PRAGMA journal_mode = truncate; INSERT INTO t1 VALUES(1, 2);"
        "INSERT INTO t1 VALUES(3, 4)");
  SqliteDb b(uri);
  b.run("PRAGMA journal_mode = delete");
  UndeletableShim::fail_delete = true;
  CHECK((b.exec("INSERT INTO t1 VALUES(5, 6)") & 0xff) == SQLITE_IOERR);
  UndeletableShim::fail_delete = false;
  CHECK(access(db + "-journal") == 1);
  // The journal is hot: a must roll it back, not read b's uncommitted row.
  CHECK(a.query("SELECT group_concat(a) FROM t1") == "1,3");
  b.run("PRAGMA journal_mode = truncate; INSERT INTO t1 VALUES(5, 6)");
  CHECK(a.query("SELECT group_concat(a) FROM t1") == "1,3,5");
  CHECK(a.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE("concurrency: URI parameter, PRAGMA pagefile_concurrency and PRAGMA pagefile_stats") {
  SqliteDb conn(pagefile_uri(fresh("pragmas"), "&concurrency=3"));
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run("CREATE TABLE t(x)");
  CHECK(conn.query("PRAGMA pagefile_concurrency") == "3");
  CHECK(conn.query("PRAGMA pagefile_concurrency=12") == "12");
  CHECK(conn.query("PRAGMA pagefile_concurrency") == "12");
  CHECK(conn.exec("PRAGMA pagefile_concurrency=0") == SQLITE_ERROR);
  CHECK(conn.exec("PRAGMA pagefile_concurrency=abc") == SQLITE_ERROR);
  conn.run("INSERT INTO t SELECT randomblob(3000) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 500) SELECT value FROM s)");
  std::string stats = conn.query("PRAGMA pagefile_stats");
  INFO(stats);
  CHECK(stats.find("requests=") == 0);
  for (const char* key : {"pages_written=", "pages_read=", "waits=", "wait_ms=", "bytes_written=", "syncs="}) {
    CHECK(stats.find(key) != std::string::npos);
  }
  CHECK(stats.find("pages_written=0 ") == std::string::npos);
  CHECK(stats.find("concurrency=12") != std::string::npos);
  // Not ours: SQLite handles it as usual.
  conn.run("PRAGMA cache_size=77");
  CHECK(conn.query("PRAGMA cache_size") == "77");
}

// A fresh database's URI at `location` ("local": a Pagefile at its path
// in the store's home; "remote": on the embedded servers).
std::string fresh_at(const std::string& location, const std::string& stem) {
  std::string db = location == "local" ? (store().home / fresh(stem)).string() : fresh(stem);
  return pagefile_uri(db, "&location=") + location;
}

// A counter of PRAGMA pagefile_stats.
uint64_t stat_of(const std::string& stats, const std::string& key) {
  auto at = stats.find(key + "=");
  REQUIRE(at != std::string::npos);
  return std::stoull(stats.substr(at + key.size() + 1));
}

TEST_CASE("sequential reads: a local file's pages in runs of one read each, the embedded servers' not ahead") {
  // The embedded default's servers are read on the caller's thread before
  // the request returns, so a read ahead would only read early. A local
  // Pagefile reads pages in order several at a time, with one system call
  // (ByteFile's runs). Remote servers elsewhere are read ahead:
  // vfs_process_test.
  for (const char* location : {"local", "remote"}) {
    CAPTURE(location);
    std::string uri = fresh_at(location, "scan");
    {
      SqliteDb conn(uri);
      conn.run("CREATE TABLE t(x); INSERT INTO t SELECT randomblob(3500) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 400) SELECT value FROM s)");
    }
    SqliteDb conn(uri + "&concurrency=8");
    conn.run("PRAGMA cache_size=5");
    CHECK(conn.query("SELECT count(*), sum(length(x)) FROM t") == "400|1400000");
    std::string stats = conn.query("PRAGMA pagefile_stats");
    INFO(stats);
    const uint64_t pages = stat_of(stats, "pages_read");
    const uint64_t requests = stat_of(stats, "read_requests");
    CHECK(pages > 400);
    if (std::string(location) == "local") {
      // After a few pages alone, runs of 4, 8, 16, then 32 pages: a few
      // dozen reads.
      CHECK(requests < pages / 10);
      CHECK(stat_of(stats, "read_ahead_used") > pages * 9 / 10);
    } else {
      CHECK(requests == pages);
      CHECK(stat_of(stats, "read_ahead_used") == 0);
    }
  }
}

TEST_CASE("synchronous=OFF: a local database syncs nothing at its commits, as on unix; a remote one at its unlocks; "
          "another connection reads every commit of both") {
  for (const char* location : {"local", "remote"}) {
    CAPTURE(location);
    std::string uri = fresh_at(location, "nosync");
    SqliteDb writer(uri);
    writer.run("PRAGMA synchronous=OFF; CREATE TABLE c(n INTEGER); INSERT INTO c VALUES(0)");
    SqliteDb reader(uri);
    const uint64_t before = stat_of(writer.query("PRAGMA pagefile_stats"), "syncs");
    for (int i = 1; i <= 20; ++i) {
      writer.run("BEGIN; UPDATE c SET n = n + 1; COMMIT");
      CHECK(reader.query("SELECT n FROM c") == std::to_string(i));
    }
    const uint64_t after = stat_of(writer.query("PRAGMA pagefile_stats"), "syncs");
    if (std::string(location) == "local") {
      // Written into the page cache, which every process reads: nothing
      // to publish, and SQLite asked for no sync.
      CHECK(after == before);
    } else {
      // A remote file's writes and size are published by a sync.
      CHECK(after >= before + 20);
    }
    // And with synchronous=FULL, SQLite's own syncs are made.
    writer.run("PRAGMA synchronous=FULL; BEGIN; UPDATE c SET n = n + 1; COMMIT");
    CHECK(stat_of(writer.query("PRAGMA pagefile_stats"), "syncs") > after);
    CHECK(reader.query("SELECT n FROM c") == "21");
    CHECK(reader.query("PRAGMA integrity_check") == "ok");
  }
}

TEST_CASE("a rollback journal is opened under the sequential policy unless the database names one") {
  // What xFileControl(PRAGMA pagefile_policy) says of a descriptor.
  auto policy_of = [](RawFile& f) {
    char* args[3] = {nullptr, const_cast<char*>("pagefile_policy"), nullptr};
    REQUIRE(f.m().xFileControl(f.file, SQLITE_FCNTL_PRAGMA, args) == SQLITE_OK);
    REQUIRE(args[0] != nullptr);
    std::string text = args[0];
    sqlite3_free(args[0]);
    return text.substr(0, text.find(' '));
  };
  std::string db = fresh("journal-policy");
  RawFile main_db(db, SQLITE_OPEN_MAIN_DB);
  REQUIRE(main_db.rc == SQLITE_OK);
  RawFile journal(db, SQLITE_OPEN_MAIN_JOURNAL);
  REQUIRE(journal.rc == SQLITE_OK);
  CHECK(policy_of(main_db) == "policy=random");
  CHECK(policy_of(journal) == "policy=sequential");

  std::string named = fresh("journal-policy-named");
  const char* params[] = {"policy", "looping"};
  RawFile named_db(named, SQLITE_OPEN_MAIN_DB, params, 1);
  REQUIRE(named_db.rc == SQLITE_OK);
  RawFile named_journal(named, SQLITE_OPEN_MAIN_JOURNAL, params, 1);
  REQUIRE(named_journal.rc == SQLITE_OK);
  CHECK(policy_of(named_journal) == "policy=looping");
}

TEST_CASE("on a bus whose servers all run in this process, a new file sits whole on one server unless the URI places it") {
  // The share files all the embedded servers hold.
  auto shares = [] {
    size_t n = 0;
    for (const auto& server : std::filesystem::directory_iterator(store().home.path())) {
      if (!std::filesystem::is_directory(server.path() / "shares")) continue;
      for (const auto& f : std::filesystem::directory_iterator(server.path() / "shares")) {
        if (f.path().extension() == ".pf") ++n;
      }
    }
    return n;
  };
  const char* fill = "CREATE TABLE t(x); INSERT INTO t SELECT randomblob(3000) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 100) SELECT value FROM s)";
  store();
  size_t before = shares();
  {
    SqliteDb conn(pagefile_uri(fresh("whole")));
    conn.run(fill);  // its journal came and went
    CHECK(conn.query("SELECT count(*) FROM t") == "100");
  }
  CHECK(shares() == before + 1);
  {
    SqliteDb conn(pagefile_uri(fresh("striped"), "&placement=stripe"));
    conn.run(fill);
    CHECK(conn.query("PRAGMA integrity_check") == "ok");
  }
  CHECK(shares() == before + 1 + 4);
}
