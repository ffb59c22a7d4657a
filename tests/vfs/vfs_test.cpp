// The VFS in one process, linked statically with Debian's SQLite, on the
// embedded bus (4 in-process servers) and on local Pagefiles. Each case
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
#include "tests/vfs/sqlite_db.h"
#include "pagefile/pagefile_vfs.h"

using pagefile::test::SqliteDb;
using pagefile::test::TempDir;

namespace {

using pagefile::test::store;

sqlite3_vfs* vfs() {
  store();
  return sqlite3_vfs_find("pagefile");
}

// A unique store name per case.
std::string fresh(const std::string& stem) {
  static int n = 0;
  return fmt::format("{}-{}-{}.db", stem, ::getpid(), ++n);
}

// The URI of database `db` on the pagefile VFS, with more `params` ("&a=b").
std::string pagefile_uri(const std::string& db, const std::string& params = "") {
  return "file:" + db + "?vfs=pagefile" + params;
}

// Opens a file through the VFS's xOpen, with a filename SQLite made (so URI
// parameters work as in a real open).
struct RawFile {
  sqlite3_filename filename = nullptr;
  std::vector<char> memory;
  sqlite3_file* file = nullptr;
  int rc = SQLITE_ERROR;

  RawFile(const std::string& db, int role, const char* const* params = nullptr, int n_params = 0,
          int extra_flags = SQLITE_OPEN_CREATE) {
    filename = sqlite3_create_filename(db.c_str(), (db + "-journal").c_str(), (db + "-wal").c_str(), n_params,
                                       const_cast<const char**>(params));
    memory.assign(static_cast<size_t>(vfs()->szOsFile), 0);
    file = reinterpret_cast<sqlite3_file*>(memory.data());
    const char* name = filename;
    if (role == SQLITE_OPEN_MAIN_JOURNAL) name = sqlite3_filename_journal(filename);
    if (role == SQLITE_OPEN_WAL) name = sqlite3_filename_wal(filename);
    int out = 0;
    rc = vfs()->xOpen(vfs(), name, file, role | SQLITE_OPEN_READWRITE | extra_flags, &out);
  }
  ~RawFile() {
    if (file->pMethods) file->pMethods->xClose(file);
    sqlite3_free_filename(filename);
  }
  const sqlite3_io_methods& m() const { return *file->pMethods; }
  int64_t size() const {
    sqlite3_int64 n = -1;
    REQUIRE(m().xFileSize(file, &n) == SQLITE_OK);
    return n;
  }
  int write(const std::string& bytes, int64_t at) {
    return m().xWrite(file, bytes.data(), static_cast<int>(bytes.size()), at);
  }
  std::string read(int n, int64_t at, int* rc_out = nullptr) {
    std::string out(static_cast<size_t>(n), 'x');
    int r = m().xRead(file, out.data(), n, at);
    if (rc_out) *rc_out = r;
    return out;
  }
};

std::string pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 % 251);
  return s;
}

int access(const std::string& name, int flags = SQLITE_ACCESS_EXISTS) {
  int result = -1;
  REQUIRE(vfs()->xAccess(vfs(), name.c_str(), flags, &result) == SQLITE_OK);
  return result;
}

}  // namespace

TEST_CASE("store names: a normal path is its own name, others are made normal; a relative one is made absolute") {
  using pagefile::vfs::store_name;
  // (Run before any bus is configured: the process's databases are local,
  // and a relative name's store name is its absolute path, as on unix.)
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
  CHECK(store_name("/../b.db").status().is(pagefile::Code::kInvalidArgument));
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
  CHECK(vfs()->xFullPathname(vfs(), "/..", sizeof full, full) == SQLITE_CANTOPEN);
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

TEST_CASE("locking: two connections, SQLITE_BUSY promptly, exact xCheckReservedLock, change counter") {
  std::string db = fresh("twoconn");
  SqliteDb a(pagefile_uri(db));
  SqliteDb b(pagefile_uri(db));
  a.run("CREATE TABLE t(x); INSERT INTO t VALUES(1)");
  CHECK(b.query("SELECT count(*) FROM t") == "1");  // b caches page 1 and more
  a.run("BEGIN IMMEDIATE; INSERT INTO t VALUES(2)");
  // RESERVED held by a: b may read, not write; and its check sees it.
  CHECK(b.query("SELECT count(*) FROM t") == "1");
  auto started = std::chrono::steady_clock::now();
  CHECK(b.exec("INSERT INTO t VALUES(3)") == SQLITE_BUSY);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));  // promptly, not a hang
  sqlite3_file* file = nullptr;
  REQUIRE(sqlite3_file_control(b.get(), "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK);
  int reserved = -1;
  REQUIRE(file->pMethods->xCheckReservedLock(file, &reserved) == SQLITE_OK);
  CHECK(reserved == 1);
  a.run("COMMIT");
  REQUIRE(file->pMethods->xCheckReservedLock(file, &reserved) == SQLITE_OK);
  CHECK(reserved == 0);
  // b took SHARED again after a wrote: it must see the new row and size.
  CHECK(b.query("SELECT group_concat(x) FROM t") == "1,2");
  a.run("INSERT INTO t SELECT randomblob(4000) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 50) SELECT value FROM s)");
  CHECK(b.query("SELECT count(*) FROM t") == "52");
  CHECK(b.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE("WAL on a remote database: refused with a clear error unless locking_mode=EXCLUSIVE, which works") {
  std::string db = fresh("wal");
  {
    SqliteDb conn(pagefile_uri(db));
    conn.run("CREATE TABLE t(x)");
    CHECK(conn.exec("PRAGMA journal_mode=WAL") == SQLITE_ERROR);
    CHECK(conn.last_error().find("locking_mode=EXCLUSIVE") != std::string::npos);
    CHECK(conn.query("PRAGMA journal_mode") == "delete");
  }
  {
    SqliteDb conn(pagefile_uri(db));
    conn.run("PRAGMA locking_mode=EXCLUSIVE");
    CHECK(conn.query("PRAGMA journal_mode=WAL") == "wal");
    conn.run("INSERT INTO t SELECT randomblob(2000) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value FROM s)");
    conn.run("PRAGMA wal_checkpoint; INSERT INTO t VALUES(1)");
    CHECK(conn.query("SELECT count(*) FROM t") == "301");
    CHECK(conn.query("PRAGMA integrity_check") == "ok");
  }
  {
    // The database is in WAL mode now: without exclusive mode it cannot be
    // read (no shared memory for its wal-index), as SQLite answers on a VFS
    // without xShmMap, and the error says why.
    SqliteDb conn(pagefile_uri(db));
    CHECK(conn.exec("SELECT count(*) FROM t") == SQLITE_CANTOPEN);
    CHECK(conn.query("PRAGMA pagefile_last_error").find("locking_mode=EXCLUSIVE") != std::string::npos);
  }
  SqliteDb conn(pagefile_uri(db));
  conn.run("PRAGMA locking_mode=EXCLUSIVE");
  CHECK(conn.query("SELECT count(*) FROM t") == "301");
}

TEST_CASE("characteristics and controls: claims, NOTFOUND, handled ops, version 3 with xFetch") {
  RawFile f(fresh("controls"), SQLITE_OPEN_MAIN_DB);
  REQUIRE(f.rc == SQLITE_OK);
  // Pages of one sector or less: a crash changes no byte a write did not cover.
  CHECK(f.m().xDeviceCharacteristics(f.file) == SQLITE_IOCAP_POWERSAFE_OVERWRITE);
  CHECK(f.m().xSectorSize(f.file) == 4096);
  {
    // Larger pages may be left part old, part new: nothing is claimed.
    const char* params[] = {"page_size", "16384", nullptr};
    RawFile big(fresh("controls-big"), SQLITE_OPEN_MAIN_DB, params, 1);
    REQUIRE(big.rc == SQLITE_OK);
    CHECK(big.m().xDeviceCharacteristics(big.file) == 0);
    CHECK(big.m().xSectorSize(big.file) == 16384);
  }
  CHECK(f.m().iVersion == 3);
  CHECK((f.m().xFetch != nullptr));
  CHECK((f.m().xUnfetch != nullptr));
  CHECK((f.m().xShmMap != nullptr));  // a local database's -shm (default_test.cpp)
  void* p = &f;
  CHECK(f.m().xFetch(f.file, 0, 4096, &p) == SQLITE_OK);
  CHECK(p == nullptr);
  sqlite3_int64 hint = 1 << 20;
  int chunk = 65536;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_SIZE_HINT, &hint) == SQLITE_OK);
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_CHUNK_SIZE, &chunk) == SQLITE_OK);
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_SYNC, nullptr) == SQLITE_OK);
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_COMMIT_PHASETWO, nullptr) == SQLITE_OK);
  char* name = nullptr;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_VFSNAME, &name) == SQLITE_OK);
  CHECK(std::string(name) == "pagefile");
  sqlite3_free(name);
  int unused = 0;
  int level = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_LOCKSTATE, &level) == SQLITE_OK);
  CHECK(level == SQLITE_LOCK_NONE);
  int err = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_LAST_ERRNO, &err) == SQLITE_OK);
  CHECK(err == 0);
  char* temp_name = nullptr;  // the unix VFS's kind of temp name, where temp files go
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_TEMPFILENAME, &temp_name) == SQLITE_OK);
  REQUIRE(temp_name != nullptr);
  CHECK(std::string(temp_name).find("/etilqs_") != std::string::npos);
  sqlite3_free(temp_name);
  // The claim asked (-1), turned off, on again, as on unix.
  int psow = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) == SQLITE_OK);
  CHECK(psow == 1);
  psow = 0;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) == SQLITE_OK);
  CHECK(f.m().xDeviceCharacteristics(f.file) == 0);
  psow = 1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) == SQLITE_OK);
  CHECK(f.m().xDeviceCharacteristics(f.file) == SQLITE_IOCAP_POWERSAFE_OVERWRITE);
  // An mmap limit is kept and answered, though nothing is mapped.
  sqlite3_int64 limit = 1 << 20;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_MMAP_SIZE, &limit) == SQLITE_OK);
  CHECK(limit == 0);
  limit = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_MMAP_SIZE, &limit) == SQLITE_OK);
  CHECK(limit == 1 << 20);
  for (int op : {SQLITE_FCNTL_PERSIST_WAL, SQLITE_FCNTL_HAS_MOVED, 9999}) {
    CAPTURE(op);
    CHECK(f.m().xFileControl(f.file, op, &unused) == SQLITE_NOTFOUND);
  }
  char* pragma[3] = {nullptr, const_cast<char*>("cache_size"), nullptr};
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_PRAGMA, pragma) == SQLITE_NOTFOUND);
  // mmap asked for: SQLite falls back to xRead.
  SqliteDb conn(pagefile_uri(fresh("mmap")));
  CHECK(conn.query("PRAGMA mmap_size=1000000") == "1000000");
  conn.run("CREATE TABLE t(x); INSERT INTO t VALUES(42)");
  CHECK(conn.query("SELECT x FROM t") == "42");
}

// A database made by `sql` as a local Pagefile at dir/name; its path.
std::string make_local_db(const TempDir& dir, const std::string& name, const std::string& sql) {
  std::string path = (dir / name).string();
  SqliteDb conn(pagefile_uri(path, "&location=local"));
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run(sql);
  return path;
}

TEST_CASE("errors keep their meaning: a damaged Pagefile is SQLITE_CORRUPT, opened or read by a function") {
  TempDir dir;
  std::string path = make_local_db(dir, "damaged.db", "CREATE TABLE t(x); INSERT INTO t VALUES('kept')");
  {
    // A byte of its header past the magic, overwritten. (Without the magic
    // it would be a file of something else: SQLITE_NOTADB.)
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.is_open());
    f.seekp(12);
    f.put('\x7f');
  }
  SqliteDb conn(pagefile_uri(path, "&location=local"));
  if (conn.open_rc() == SQLITE_OK) {
    // (SQLite may open lazily: the first read then meets the damage.)
    CHECK(conn.exec("SELECT * FROM t") == SQLITE_CORRUPT);
  } else {
    CHECK(conn.open_rc() == SQLITE_CORRUPT);
  }
  SqliteDb other(fresh("corrupt-fn"));
  REQUIRE(other.open_rc() == SQLITE_OK);
  int rc = other.exec(fmt::format("SELECT pagefile_read('{}')", path));
  CHECK(rc == SQLITE_CORRUPT);
  CHECK(other.last_error().find("Corruption") != std::string::npos);
}

TEST_CASE("location=local: a local Pagefile at the path, same behaviour") {
  TempDir dir;
  std::string path = make_local_db(dir, "local.db",
                                   "CREATE TABLE t(x); INSERT INTO t SELECT value FROM (WITH RECURSIVE s(value) AS "
                                   "(SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 1000) SELECT value FROM s)");
  {
    SqliteDb conn(pagefile_uri(path, "&location=local"));
    CHECK(conn.query("PRAGMA integrity_check") == "ok");
    CHECK(conn.query(fmt::format("SELECT pagefile_exists('{}')", path)) == "1");
  }
  CHECK(std::filesystem::exists(path));
  CHECK(!std::filesystem::exists(path + "-journal"));
  SqliteDb a(pagefile_uri(path, "&location=local"));
  SqliteDb b(pagefile_uri(path, "&location=local"));
  a.run("BEGIN IMMEDIATE");
  CHECK(b.exec("BEGIN IMMEDIATE") == SQLITE_BUSY);
  a.run("DELETE FROM t WHERE x > 10; COMMIT");
  CHECK(b.query("SELECT count(*) FROM t") == "10");
}

TEST_CASE("location=local where databases are remote by default: a relative name is the file at its absolute path, after a chdir too") {
  vfs();  // PAGEFILE_BUS names the embedded bus
  REQUIRE(std::getenv("PAGEFILE_BUS") != nullptr);
  TempDir dir;
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir / "a");
  {
    SqliteDb db("file:here.db?vfs=pagefile&location=local", "pagefile", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
    REQUIRE(db.open_rc() == SQLITE_OK);
    db.run("CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    std::filesystem::current_path(dir / "b");
    db.run("BEGIN; INSERT INTO t VALUES(2)");
    CHECK(std::filesystem::exists(dir / "a" / "here.db-journal"));  // its journal beside it, in a
    CHECK_FALSE(std::filesystem::exists(dir / "b" / "here.db-journal"));
    db.run("COMMIT");
    CHECK(db.query(fmt::format("SELECT pagefile_exists('{}')", (dir / "a" / "here.db").string())) == "1");
  }
  std::filesystem::current_path(before);
  CHECK(std::filesystem::exists(dir / "a" / "here.db"));
  CHECK_FALSE(std::filesystem::exists(dir / "b" / "here.db-journal"));
  CHECK_FALSE(std::filesystem::exists(dir / "b" / "here.db"));
  SqliteDb again(pagefile_uri((dir / "a" / "here.db").string(), "&location=local"));
  CHECK(again.query("SELECT group_concat(x) FROM t") == "1,2");
  // One path is one database of a process: opened local here, it is not
  // opened remote too (its journal's name could not say whose it is).
  SqliteDb remote(pagefile_uri((dir / "a" / "here.db").string()));
  CHECK(remote.open_rc() == SQLITE_CANTOPEN);
  char why[512] = {};
  vfs()->xGetLastError(vfs(), sizeof why, why);
  CHECK(std::string(why).find("this process opened it local already") != std::string::npos);
}

TEST_CASE("xAccess of a journal follows its database: the remote store's answer until it is opened local, the file's after") {
  vfs();  // PAGEFILE_BUS names the embedded bus
  REQUIRE(std::getenv("PAGEFILE_BUS") != nullptr);
  TempDir dir;
  const std::string path = (dir / "late.db").string();
  const std::string journal = path + "-journal";
  {
    // A file at the journal's path with more than a header in it: what a
    // stat of a local journal takes for one.
    std::ofstream out(journal, std::ios::binary);
    out << std::string(2 * 4096, 'j');
  }
  // Asked twice (the second answer as the first), while the database is
  // the remote store's, as every name is here by default.
  CHECK(access(journal) == 0);
  CHECK(access(journal) == 0);
  SqliteDb db(pagefile_uri(path, "&location=local"));
  REQUIRE(db.open_rc() == SQLITE_OK);
  CHECK(access(journal) == 1);
  CHECK(access(journal) == 1);
  std::filesystem::remove(journal);
  CHECK(access(journal) == 0);
}

namespace {

// A local file made at its open, as the VFS's default opens one.
pagefile::OpenOptions new_local_file() {
  pagefile::OpenOptions open;
  open.create = true;
  open.location = pagefile::Location::kLocal;
  return open;
}

}  // namespace

TEST_CASE("a file's direct calls (lock levels, size) fail once its client stops, as its calls by descriptor do") {
  // The VFS asks a descriptor's PageIo itself at every transaction
  // (client/client_access.h); Client::stop closes every descriptor, and
  // nothing may reach a file the client has let go.
  TempDir dir;
  auto client = pagefile::Client::start();
  REQUIRE(client);
  pagefile::OpenOptions open = new_local_file();
  auto file = pagefile::vfs::ByteFile::open(**client, (dir / "direct.db").string(), open,
                                            pagefile::vfs::ByteFile::Layout::kPages, nullptr);
  REQUIRE(file);
  auto io = (*file)->io();
  REQUIRE(io);
  CHECK((*io)->set_lock_level(pagefile::LockLevel::kShared));
  CHECK((*file)->refresh_size());
  const pagefile::Fd fd = (*file)->fd();
  REQUIRE((*client)->stop());
  CHECK((*client)->set_lock_level(fd, pagefile::LockLevel::kNone).is(pagefile::Code::kInvalidArgument));
  auto after = (*file)->io();
  REQUIRE_FALSE(after);
  CHECK(after.status().is(pagefile::Code::kInvalidArgument));
  CHECK(after.status().to_string().find("is stopped") != std::string::npos);
  CHECK((*file)->refresh_size().is(pagefile::Code::kInvalidArgument));
}

TEST_CASE("a WAL keeps the pages it reads while a checkpoint runs, and 16 after; changed pages beyond 16 are written meanwhile") {
  // ByteFile::keep_read_pages, as the VFS calls it while a connection of
  // the process holds the WAL's checkpoint lock: up to kCheckpointPages
  // pages read are kept, and lowered, the highest 16 stay.
  TempDir dir;
  auto client = pagefile::Client::start();
  REQUIRE(client);
  pagefile::OpenOptions open = new_local_file();
  open.sector_checksums = true;  // as the VFS makes WAL files
  using pagefile::vfs::ByteFile;
  auto stats = std::make_shared<pagefile::vfs::IoStats>();
  auto file = ByteFile::open(**client, (dir / "k.db-wal").string(), open, ByteFile::Layout::kBytes, stats);
  REQUIRE(file);
  ByteFile& wal = **file;
  const auto page = static_cast<int64_t>(wal.page_size());
  constexpr int kPages = 40;
  static_assert(kPages > ByteFile::kMaxCachedPages && kPages < ByteFile::kCheckpointPages);
  // Every byte of page p of the data holds p.
  for (int p = 0; p < kPages; ++p) {
    REQUIRE(wal.write(std::vector<std::byte>(static_cast<size_t>(page), static_cast<std::byte>(p)), p * page));
  }
  REQUIRE(wal.sync());
  wal.drop_cache();
  // Reads 100 bytes of each page in [from, to): the pages read to do it.
  auto read_parts = [&](int from, int to) {
    const uint64_t before = stats->pages_read.load();
    for (int p = from; p < to; ++p) {
      std::vector<std::byte> got(100);
      REQUIRE(wal.read(got, p * page + 1000));
      CHECK(got[0] == static_cast<std::byte>(p));
      CHECK(got[99] == static_cast<std::byte>(p));
    }
    return stats->pages_read.load() - before;
  };
  CHECK(read_parts(0, kPages) == kPages);
  CHECK(read_parts(0, kPages) >= kPages - ByteFile::kMaxCachedPages);  // 16 kept
  wal.drop_cache();
  wal.keep_read_pages(ByteFile::kCheckpointPages);
  CHECK(read_parts(0, kPages) == kPages);
  CHECK(read_parts(0, kPages) == 0);  // all kept
  wal.keep_read_pages(ByteFile::kMaxCachedPages);
  CHECK(read_parts(kPages - 16, kPages) == 0);  // the highest 16 stayed
  CHECK(read_parts(0, kPages - 16) == kPages - 16);

  // Changed in part while pages are kept: beyond 16 changed, the lowest
  // are written at once, as ever, and nothing is lost.
  wal.drop_cache();
  wal.keep_read_pages(ByteFile::kCheckpointPages);
  const uint64_t writes_before = stats->write_requests.load();
  for (int p = 0; p < kPages; ++p) REQUIRE(wal.write(std::vector<std::byte>(10, std::byte{0xee}), p * page + 500));
  CHECK(stats->write_requests.load() - writes_before == kPages - ByteFile::kMaxCachedPages);
  REQUIRE(wal.sync());
  wal.keep_read_pages(ByteFile::kMaxCachedPages);
  auto again = ByteFile::open(**client, (dir / "k.db-wal").string(), open, ByteFile::Layout::kBytes, nullptr);
  REQUIRE(again);
  for (int p = 0; p < kPages; ++p) {
    std::vector<std::byte> got(static_cast<size_t>(page));
    REQUIRE((*again)->read(got, p * page));
    CHECK(got[499] == static_cast<std::byte>(p));
    CHECK(got[500] == std::byte{0xee});
    CHECK(got[509] == std::byte{0xee});
    CHECK(got[510] == static_cast<std::byte>(p));
  }
}

TEST_CASE("a journal's length: read whole and checked at each refresh; under the word, written as one sector") {
  // ByteFile::refresh_size reads the length page whole and checks it (the
  // lengths another descriptor wrote, an emptied file, damage anywhere in
  // it). Its write says that only its first 16 bytes changed: where the
  // page was read whole while no other descriptor may write (the VFS's
  // word: a WAL's write lock), a file with sector checksums writes its
  // first sector alone, and without the word the page whole.
  TempDir dir;
  auto client = pagefile::Client::start();
  REQUIRE(client);
  pagefile::OpenOptions open = new_local_file();
  open.sector_checksums = true;  // as the VFS makes journals and WAL files
  const std::string path = (dir / "log-wal").string();
  using pagefile::vfs::ByteFile;
  auto a = ByteFile::open(**client, path, open, ByteFile::Layout::kBytes, nullptr);
  REQUIRE(a);
  auto b = ByteFile::open(**client, path, open, ByteFile::Layout::kBytes, nullptr);
  REQUIRE(b);
  auto bytes = [](size_t n, char c) { return std::vector<std::byte>(n, static_cast<std::byte>(c)); };
  auto reload = [](ByteFile& f) {
    REQUIRE(f.reload());
    return f.size();
  };
  // Runs `f` under the word of `file` (b writes only while it is not said).
  auto alone = [](ByteFile& file, auto&& f) {
    auto io = file.io();
    REQUIRE(io);
    (*io)->exclude_other_writers(true);
    f();
    (*io)->exclude_other_writers(false);
  };
  auto reload_alone = [&](ByteFile& f) {
    alone(f, [&] { REQUIRE(f.reload()); });
    return f.size();
  };
  // Damages byte `at` of page 0 (doc/page_format.md: it follows the
  // header, 4096 bytes, and its group's block of sector checksums, 16
  // bytes a sector).
  const uint32_t page_size = (*a)->page_size();
  REQUIRE(page_size >= 3 * 4096);
  auto damage = [&](size_t at) {
    std::fstream disk(path, std::ios::in | std::ios::out | std::ios::binary);
    disk.seekg(static_cast<std::streamoff>(4096 + page_size / 4096 * 4096 + at));
    char c = 0;
    disk.get(c);
    disk.seekp(static_cast<std::streamoff>(4096 + page_size / 4096 * 4096 + at));
    disk.put(static_cast<char>(c ^ 0x04));
  };
  REQUIRE((*a)->write(bytes(100, 'a'), 0));
  REQUIRE((*a)->drain());
  CHECK(reload(**b) == 100);
  CHECK(reload_alone(**a) == 100);
  // Longer, by the other descriptor.
  REQUIRE((*b)->write(bytes(30000, 'b'), 100));
  REQUIRE((*b)->drain());
  CHECK(reload_alone(**a) == 30100);
  std::vector<std::byte> got(30100);
  auto n = (*a)->read(got, 0);
  REQUIRE(n);
  CHECK(*n == 30100);
  CHECK(got[99] == std::byte{'a'});
  CHECK(got[30099] == std::byte{'b'});
  // Emptied (no length page left), then emptied and grown again.
  REQUIRE((*b)->truncate(0));
  CHECK(reload_alone(**a) == 0);
  CHECK(reload(**b) == 0);
  REQUIRE((*a)->write(bytes(5000, 'c'), 0));
  REQUIRE((*a)->drain());
  CHECK(reload(**b) == 5000);
  REQUIRE((*b)->truncate(200));
  CHECK(reload_alone(**a) == 200);
  // Damage past the length's 16 bytes, in the same sector or another: the
  // page fails its check, with the word or without, as for a new opener.
  for (size_t at : {size_t{100}, size_t{2 * 4096 + 7}}) {
    damage(at);
    alone(**a, [&] { CHECK((*a)->reload().is(pagefile::Code::kCorruption)); });
    CHECK((*a)->reload().is(pagefile::Code::kCorruption));
    CHECK_FALSE(ByteFile::open(**client, path, open, ByteFile::Layout::kBytes, nullptr));
    damage(at);  // (mended)
    CHECK(reload(**a) == 200);
  }
  // Its length damaged: read whole, it fails its check.
  damage(8);
  alone(**a, [&] { CHECK((*a)->reload().is(pagefile::Code::kCorruption)); });
  CHECK((*a)->size() == 200);  // (as last known: nothing else was taken)
  damage(8);
  // Written under the word after a read there: only its first sector. A
  // sector damaged behind the writer's back in between stays damaged (what
  // shows that it was not written), and is found by the next reader.
  alone(**a, [&] {
    REQUIRE((*a)->reload());
    damage(2 * 4096 + 7);
    REQUIRE((*a)->write(bytes(10, 'd'), 200));
    REQUIRE((*a)->drain());
  });
  CHECK((*b)->reload().is(pagefile::Code::kCorruption));
  damage(2 * 4096 + 7);
  CHECK(reload(**b) == 210);
  // Without the word, the page whole: damage there is written over.
  REQUIRE((*a)->reload());
  damage(2 * 4096 + 7);
  REQUIRE((*a)->write(bytes(10, 'e'), 210));
  REQUIRE((*a)->drain());
  CHECK(reload(**b) == 220);
  // The pages are not counted before the length page is read: a page 0
  // cut short (a crash during the file's first write) and one of zeros
  // each say length 0, with the word or without, as when counted.
  REQUIRE((*b)->close());
  std::filesystem::resize_file(path, 4096 + page_size / 4096 * 4096 + 100);
  CHECK(reload(**a) == 0);
  CHECK(reload_alone(**a) == 0);
  auto io = (*a)->io();
  REQUIRE(io);
  auto zeros = (*io)->write_direct(0, std::vector<std::byte>(page_size), {});
  REQUIRE(zeros);
  REQUIRE(*zeros);
  CHECK(reload(**a) == 0);
  CHECK(reload_alone(**a) == 0);
  REQUIRE((*a)->write(bytes(3, 'f'), 0));
  REQUIRE((*a)->drain());
  CHECK(reload_alone(**a) == 3);
  REQUIRE((*a)->close());
}

TEST_CASE("names on a bus: a path's directory must exist here, as for unix; a plain store name is the store's") {
  vfs();  // registered, on the embedded bus
  TempDir dir;
  std::string missing_dir = (dir.path() / "no-such-dir" / "app.db").string();
  std::string a_dir = (dir.path() / "sub").string();
  std::filesystem::create_directories(a_dir);
  struct Case {
    std::string name;
    int flags;
    const char* why;
  };
  const int create = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
  const Case cases[] = {
      {missing_dir, create, "directory"},
      {a_dir, create, "is a directory"},
      {"relative-no-such-dir/" + fresh("app"), create, "directory"},
      {fresh("plain-ro"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, "does not exist"},
      {(dir.path() / "ro-missing.db").string(), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, "does not exist"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    // The unix VFS's answer, and ours.
    sqlite3* unix_db = nullptr;
    int unix_rc = sqlite3_open_v2(c.name.c_str(), &unix_db, c.flags & ~SQLITE_OPEN_URI, "unix");
    if (unix_rc == SQLITE_OK) unix_rc = sqlite3_exec(unix_db, "PRAGMA schema_version", nullptr, nullptr, nullptr);
    sqlite3_close_v2(unix_db);
    CHECK(unix_rc == SQLITE_CANTOPEN);
    SqliteDb db(pagefile_uri(c.name), "pagefile", c.flags);
    int rc = db.open_rc() == SQLITE_OK ? db.exec("PRAGMA schema_version") : db.open_rc();
    INFO(db.error(), " / ", db.last_error());
    CHECK((rc & 0xff) == SQLITE_CANTOPEN);
    char why[512] = {};
    vfs()->xGetLastError(vfs(), sizeof why, why);
    CHECK(std::string(why).find(c.why) != std::string::npos);
  }
  // Where the directory exists, a path opens; and xAccess, xDelete and
  // xFullPathname agree on it, and on a plain name.
  // (A name holding "-mj", as a super-journal's, is a database's all the same.)
  for (std::string name : {(std::filesystem::path(a_dir) / fresh("here")).string(), fresh("plain"), fresh("x-mj")}) {
    CAPTURE(name);
    char full[1100];
    REQUIRE(vfs()->xFullPathname(vfs(), name.c_str(), sizeof full, full) == SQLITE_OK);
    // (A plain name is made absolute as unix makes it, and names the same
    // store file: the one from every directory.)
    CHECK(std::string(full) == (name.front() == '/' ? name : std::filesystem::current_path().string() + "/" + name));
    {
      SqliteDb db(pagefile_uri(name));
      REQUIRE(db.open_rc() == SQLITE_OK);
      db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
      CHECK(std::string(sqlite3_db_filename(db.get(), "main")) == full);
    }
    CHECK(access(name) == 1);
    CHECK(access(full) == 1);
    CHECK(vfs()->xDelete(vfs(), full, 1) == SQLITE_OK);
    CHECK(access(name) == 0);
    CHECK(access(full) == 0);
    CHECK(vfs()->xDelete(vfs(), name.c_str(), 1) == SQLITE_IOERR_DELETE_NOENT);
  }
}

TEST_CASE("location=local: an ordinary SQLite database at the path is read as it is, never written, and the log says how to convert it") {
  vfs();
  TempDir dir;
  std::string path = (dir.path() / "plain.db").string();
  {
    SqliteDb plain(path, "unix");
    REQUIRE(plain.open_rc() == SQLITE_OK);
    plain.run("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)");
  }
  auto bytes = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = bytes();
  {
    SqliteDb db(pagefile_uri(path, "&location=local"));
    REQUIRE(db.open_rc() == SQLITE_OK);
    char why[512] = {};
    vfs()->xGetLastError(vfs(), sizeof why, why);
    CHECK(std::string(why).find("is an ordinary SQLite database, not a Pagefile") != std::string::npos);
    CHECK(std::string(why).find("pagefile import") != std::string::npos);
    CHECK(std::string(why).find("read-only") != std::string::npos);
    CHECK(db.query("SELECT count(*) FROM t") == "2");  // read through the unix VFS
    CHECK(db.exec("INSERT INTO t VALUES (3)") == SQLITE_READONLY);
  }
  CHECK(bytes() == before);
  SqliteDb again(path, "unix");
  CHECK(again.query("SELECT count(*) FROM t") == "2");
}
