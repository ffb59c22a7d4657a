// SQLite's ioerr.test method on the pagefile VFS: a small transaction runs
// with the Nth disk operation of a kind failing (store/disk_faults.h: EIO,
// ENOSPC, a short write, a torn write), for N = 1, 2, ... until the
// transaction gets through without meeting the fault. Every time, the
// failure must reach SQLite as a clean error, and the database, opened
// afresh, must pass PRAGMA integrity_check holding either all of the
// transaction or none of it. On local Pagefiles (location=local) and on the
// embedded servers (whose shares are local Pagefiles too).
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <string>

#include <fmt/format.h>

#include "store/disk_faults.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/sqlite_db.h"
#include "pagefile/pagefile_vfs.h"

using namespace pagefile;
using pagefile::test::SqliteDb;
using pagefile::test::run_on;
using pagefile::test::store;
using pagefile::test::TempDir;

namespace {

// The transaction under test: updates, inserts and deletes over more pages
// than the cache holds, so pages spill before the commit.
constexpr const char* kWork =
    "PRAGMA cache_size = 8; BEGIN;"
    "UPDATE t SET pad = printf('%.*c', 400, char(97 + i % 26)) WHERE i % 3 = 0;"
    "INSERT INTO t(i, pad) SELECT 1000 + value, printf('%.*c', 300, char(65 + value % 26)) FROM "
    "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 60) SELECT value FROM s);"
    "DELETE FROM t WHERE i % 7 = 0;"
    "COMMIT;";

// Every scratch directory in memory when it can be, the local Pagefiles'
// and the embedded store's home alike (both are made after main starts):
// the test makes about 40 000 fsyncs and fdatasyncs, 33 s on this
// machine's disk when it is quiet but more than 1800 s beside the other
// suites and the builds in CI.
const bool kScratchInMemory = pagefile::test::scratch_in_memory();

// Where the local Pagefiles go: files at their paths, so not the test's
// working directory, which thousands of them would fill.
const TempDir& local_dir() {
  static TempDir dir;
  return dir;
}

constexpr const char* kContent = "SELECT count(*), sum(i), sum(length(pad)), group_concat(substr(pad, 1, 1), '') FROM t";

void fill(const std::string& uri) {
  run_on(uri, "CREATE TABLE t(i INTEGER PRIMARY KEY, pad TEXT);"
              "INSERT INTO t(i, pad) SELECT value, printf('%.*c', 200, char(65 + value % 26)) FROM "
              "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 200) SELECT value FROM s);");
}

// Whether `rc` is an error SQLite's user can handle: what an I/O failure
// may be reported as.
bool clean_error(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CORRUPT || primary == SQLITE_CANTOPEN;
}

struct Case {
  std::string name;
  DiskOp op;
  DiskFault fault;
  std::string journal_mode = "DELETE";  // TRUNCATE: the commit truncates the journal
  // OFF: no xSync at all; a failure must still reach the call that made it
  // (the journal's pages, written in runs, are held back until one).
  std::string synchronous = "FULL";
};

// `sticky`: the fault stays from the Nth operation on (a disk gone bad),
// for the servers, which take a failed direct write again the usual way.
void run_ioerr(const std::string& params, const Case& c, bool sticky) {
  store();
  static int serial = 0;
  bool local = params.find("location=local") != std::string::npos;
  std::string dir = local ? local_dir().path().string() + "/" : "";
  auto uri = [&](const std::string& name) { return "file:" + dir + name + "?vfs=pagefile" + params; };
  // What the transaction leaves, without faults.
  std::string before, after;
  {
    std::string name = fmt::format("ioerr-ref-{}-{}.db", ::getpid(), ++serial);
    fill(uri(name));
    SqliteDb db(uri(name));
    before = db.query(kContent);
    db.run(kWork);
    after = db.query(kContent);
    REQUIRE(before != after);
  }
  bool through = false;
  int failures = 0;
  for (uint64_t n = 1; n <= 400 && !through; ++n) {
    CAPTURE(n);
    std::string name = fmt::format("ioerr-{}-{}-{}.db", ::getpid(), ++serial, n);
    fill(uri(name));
    int rc = SQLITE_OK;
    {
      SqliteDb db(uri(name));
      REQUIRE(db.open_rc() == SQLITE_OK);
      db.run("PRAGMA journal_mode = " + c.journal_mode);
      db.run("PRAGMA synchronous = " + c.synchronous);
      DiskFaults::arm(c.op, n, c.fault, sticky);
      rc = db.exec(kWork);
      through = !DiskFaults::fired();
      DiskFaults::disarm();
      if (rc != SQLITE_OK) db.exec("ROLLBACK");
    }
    INFO("rc ", rc);
    if (through) {
      CHECK(rc == SQLITE_OK);
    } else if (rc != SQLITE_OK) {
      ++failures;
      CHECK(clean_error(rc));
    }
    SqliteDb again(uri(name));
    std::string reopening = again.error();  // (INFO's arguments are read only when a check fails)
    INFO("reopening: ", reopening);
    REQUIRE(again.open_rc() == SQLITE_OK);
    sqlite3_busy_timeout(again.get(), 5000);
    int check = again.exec("SELECT count(*) FROM t");
    INFO("reopened: ", again.error(), " / ", again.query("PRAGMA pagefile_last_error"));
    REQUIRE(check == SQLITE_OK);
    CHECK(again.query("PRAGMA integrity_check") == "ok");
    std::string now = again.query(kContent);
    if (rc == SQLITE_OK) {
      CHECK(now == after);
    } else {
      CHECK((now == before || now == after));
    }
  }
  CHECK(through);
  CHECK(failures > 0);
  MESSAGE(c.name, params, ": ", failures, " failed transactions, all clean, all or nothing");
}

const Case kCases[] = {
    {"write EIO", DiskOp::kWrite, DiskFault::kEio},
    {"write ENOSPC", DiskOp::kWrite, DiskFault::kEnospc},
    {"torn write", DiskOp::kWrite, DiskFault::kTornWrite},
    {"sync EIO", DiskOp::kSync, DiskFault::kEio},
    {"read EIO", DiskOp::kRead, DiskFault::kEio},
    {"truncate EIO", DiskOp::kTruncate, DiskFault::kEio, "TRUNCATE"},
    // On the embedded servers a write is confirmed after it returns
    // (write-behind): at synchronous=OFF no xSync confirms a rollback's
    // writes before SQLite deletes the journal, so SQLITE_FCNTL_SYNC does.
    {"write EIO, synchronous=OFF", DiskOp::kWrite, DiskFault::kEio, "DELETE", "OFF"},
    {"torn write, synchronous=OFF", DiskOp::kWrite, DiskFault::kTornWrite, "PERSIST", "OFF"},
};

}  // namespace

TEST_CASE("ioerr: local Pagefiles") {
  std::string where = local_dir().path().parent_path().string() + (kScratchInMemory ? " (tmpfs)" : "");
  MESSAGE("scratch files in ", where);
  for (const Case& c : kCases) {
    CAPTURE(c.name);
    run_ioerr("&location=local", c, /*sticky=*/false);
  }
}

TEST_CASE("ioerr: the embedded servers") {
  for (const Case& c : kCases) {
    CAPTURE(c.name);
    run_ioerr("", c, /*sticky=*/true);
  }
}

TEST_CASE("a short write is no failure: the rest is written and the transaction commits") {
  store();
  std::string name = (local_dir() / fmt::format("short-{}.db", ::getpid())).string();
  std::string uri = "file:" + name + "?vfs=pagefile&location=local";
  fill(uri);
  SqliteDb db(uri);
  for (uint64_t n = 1; n <= 20; ++n) {
    DiskFaults::arm(DiskOp::kWrite, n, DiskFault::kShortWrite);
    CHECK(db.exec(fmt::format("INSERT INTO t(i, pad) VALUES({}, 'x')", 5000 + n)) == SQLITE_OK);
  }
  DiskFaults::disarm();
  CHECK(db.query("SELECT count(*) FROM t WHERE i > 5000") == "20");
  CHECK(db.query("PRAGMA integrity_check") == "ok");
}
