// Page checksums end to end, as SQLite sees them: a byte flipped in a data
// file on disk (a server's share, or a local database) makes the next read
// of that page fail with SQLITE_CORRUPT naming the page, never return
// other bytes; `pagefile scrub` finds the page on the server without
// shipping it, and exits non-zero. With replicas=2 a damaged or lost copy
// is read from the other.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "pagefile/pagefile_vfs.h"
#include "store/disk_faults.h"
#include "tests/support/cluster.h"
#include "tests/support/page_file.h"
#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/sqlite_db.h"

using namespace pagefile::test;

namespace {

// A table of 2000 rows over a few dozen pages of `uri`'s database.
void fill(const std::string& uri) {
  run_on(uri, "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);"
              "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<2000)"
              " INSERT INTO t SELECT i, printf('row %d %s', i, hex(randomblob(40))) FROM n;");
}

// Reads every row of `uri`'s table: SQLite's code, and what the store said.
std::pair<int, std::string> read_all(const std::string& uri) {
  SqliteDb db(uri);
  REQUIRE(db.open_rc() == SQLITE_OK);
  std::string rows = db.query("SELECT count(*), sum(length(body)) FROM t");
  int rc = db.last_query_rc();
  std::string said = db.query("PRAGMA pagefile_last_error");
  // Each body: "row ", the number, " ", 80 hex digits.
  constexpr int kDigits = 9 * 1 + 90 * 2 + 900 * 3 + 1001 * 4;
  if (rc == SQLITE_OK) CHECK(rows == fmt::format("2000|{}", 2000 * 85 + kDigits));
  return {rc, said};
}

// The file id the catalog gave `name`, from `pagefile stat`.
uint64_t file_id(const TempDir& dir, const std::string& bus, const std::string& name) {
  Outcome stat = pagefile_admin(dir.path(), {"stat", name, "--bus", bus});
  INFO(stat.err);
  REQUIRE(stat.exit_status == 0);
  auto at = stat.out.find("\n  id ");
  REQUIRE(at != std::string::npos);
  return std::stoull(stat.out.substr(at + 6));
}

// app.db, its table filled and read back whole, on two pagefiled without a
// pool (every read goes to the disk).
struct FilledCluster {
  FilledCluster() {
    register_without_bus();
    fill(uri);
    CHECK(read_all(uri).first == SQLITE_OK);
  }
  PagefiledCluster cluster{2, {"--cache-pages", "0"}};
  const TempDir& dir = cluster.dir();
  std::string uri = "file:app.db?vfs=pagefile&bus=" + cluster.bus();
};

}  // namespace

TEST_CASE_FIXTURE(FilledCluster, "a byte flipped in a server's data file: SQLITE_CORRUPT naming the page; scrub reports it") {
  Outcome clean = pagefile_admin(dir.path(), {"scrub", "--bus", cluster.bus()});
  INFO(clean.err);
  CHECK(clean.exit_status == 0);
  CHECK(clean.out.find("all pages good") != std::string::npos);

  // Page 3 (SQLite's page 4) of the stripe over two servers lives on the
  // second, in its share of the file.
  uint64_t id = file_id(dir, cluster.bus(), "app.db");
  damage_page(dir / "s1" / "shares" / fmt::format("{}.pf", id), 3, 100);

  auto [rc, said] = read_all(uri);
  CHECK(rc == SQLITE_CORRUPT);
  CHECK(said.find("app.db: read page 3 from server " + cluster.server(1).address()) != std::string::npos);
  CHECK(said.find("page 3 fails its checksum on disk") != std::string::npos);

  for (const std::vector<std::string>& args : {std::vector<std::string>{"scrub", "--bus", cluster.bus()},
                                               std::vector<std::string>{"scrub", "app.db", "--bus", cluster.bus()}}) {
    Outcome scrub = pagefile_admin(dir.path(), args);
    INFO(scrub.out);
    INFO(scrub.err);
    CHECK(scrub.exit_status == 1);
    CHECK(scrub.out.find("app.db page 3: BAD on server " + cluster.server(1).address()) != std::string::npos);
    CHECK(scrub.out.find("1 problem(s)") != std::string::npos);
  }
  // Only that page: the ones beside it still read.
  SqliteDb db(uri);
  CHECK(db.query("SELECT body FROM t WHERE id = 1").rfind("row 1 ", 0) == 0);
}

TEST_CASE_FIXTURE(FilledCluster, "a server's directory emptied (its disk not mounted): SQLite gets an I/O error naming it, never other rows; scrub reports it") {
  cluster.server(1).kill();
  std::filesystem::remove_all(dir / "s1");
  std::filesystem::create_directories(dir / "s1");
  cluster.start_again(1);

  // (The first read may meet the connection the kill broke.)
  auto [rc, said] = read_all(uri);
  for (int attempt = 0; attempt < 3 && said.find("Disconnected") != std::string::npos; ++attempt) {
    std::tie(rc, said) = read_all(uri);
  }
  CHECK((rc & 0xff) == SQLITE_IOERR);
  CHECK_MESSAGE(said.find("emptied") != std::string::npos, said);
  Outcome scrub = pagefile_admin(dir.path(), {"scrub", "--bus", cluster.bus()});
  INFO(scrub.out);
  INFO(scrub.err);
  CHECK(scrub.exit_status == 1);
  CHECK(scrub.out.find("app.db: server " + cluster.server(1).address() + " could not scrub") != std::string::npos);
  CHECK(scrub.out.find("emptied") != std::string::npos);
}

TEST_CASE("a byte flipped in a local database: SQLITE_CORRUPT naming the page") {
  // The scan reads the pages in runs of several (ByteFile): as runs are
  // now, page 3 is the first of the first (a run's first page failing),
  // page 37 inside the fourth, pages 31 to 62 (a run ending before it).
  register_without_bus();
  for (int64_t page : {3, 37}) {
    CAPTURE(page);
    TempDir dir;
    std::string path = (dir / "local.db").string();
    std::string uri = "file:" + path + "?vfs=pagefile&location=local";
    fill(uri);
    CHECK(read_all(uri).first == SQLITE_OK);
    damage_page(path, page, 100);
    auto [rc, said] = read_all(uri);
    CHECK(rc == SQLITE_CORRUPT);
    CHECK(said.find(fmt::format("local.db: page {} fails its checksum on disk", page)) != std::string::npos);
  }
}

TEST_CASE("the 16 header bytes SQLite reads at each transaction: read alone while they are those of the page as last checked, else the page is checked whole") {
  // ByteFile reads only the bytes of part of a local page when they equal
  // those of the page as it last read it whole and checked; bytes that
  // differ (damaged here) send it to the whole page, which fails.
  register_without_bus();
  TempDir dir;
  std::string path = (dir / "local.db").string();
  std::string uri = "file:" + path + "?vfs=pagefile&location=local";
  fill(uri);
  SqliteDb db(uri);
  REQUIRE(db.open_rc() == SQLITE_OK);
  CHECK(db.query("SELECT count(*) FROM t") == "2000");
  sqlite3_file* file = nullptr;
  REQUIRE(sqlite3_file_control(db.get(), "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK);
  auto read = [&](int amount, int64_t offset, std::string& bytes) {
    bytes.assign(static_cast<size_t>(amount), '\0');
    return file->pMethods->xRead(file, bytes.data(), amount, offset);
  };
  std::string before;
  REQUIRE(read(16, 24, before) == SQLITE_OK);
  std::string again;
  // A byte of page 1 outside the 16: they are still those of the page as
  // checked, and read so; the whole page fails.
  damage_page(path, 0, 200);
  CHECK(read(16, 24, again) == SQLITE_OK);
  CHECK(again == before);
  CHECK((read(4096, 0, again) & 0xff) == SQLITE_CORRUPT);
  damage_page(path, 0, 200);  // (flipped back)
  CHECK(read(4096, 0, again) == SQLITE_OK);
  // One of the 16: never returned; the page read whole fails its check.
  damage_page(path, 0, 27);
  CHECK((read(16, 24, again) & 0xff) == SQLITE_CORRUPT);
  CHECK((read(16, 24, again) & 0xff) == SQLITE_CORRUPT);
  damage_page(path, 0, 27);
  CHECK(read(16, 24, again) == SQLITE_OK);
  CHECK(again == before);
  CHECK(db.query("SELECT count(*) FROM t") == "2000");
  // A write of page 1 that fails (nothing reaches the disk): the client
  // refuses the page until it is written again, and the 16 bytes, still
  // those checked on disk, are refused too.
  std::string page;
  REQUIRE(read(4096, 0, page) == SQLITE_OK);
  pagefile::DiskFaults::arm(pagefile::DiskOp::kWrite, 1, pagefile::DiskFault::kEio);
  CHECK(file->pMethods->xWrite(file, page.data(), 4096, 0) != SQLITE_OK);
  CHECK(pagefile::DiskFaults::fired());
  pagefile::DiskFaults::disarm();
  CHECK(read(16, 24, again) != SQLITE_OK);
  CHECK(file->pMethods->xWrite(file, page.data(), 4096, 0) == SQLITE_OK);
  CHECK(read(16, 24, again) == SQLITE_OK);
  CHECK(again == before);
}

TEST_CASE("replicas=2: a damaged copy, then a killed server, and every row still reads; the journal keeps as many copies") {
  register_without_bus();
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  const TempDir& dir = cluster.dir();
  std::string uri = "file:copied.db?vfs=pagefile&replicas=2&bus=" + cluster.bus();
  fill(uri);
  {
    // (A URI without replicas=: the database's journal follows the
    // database's recorded count.)
    SqliteDb db("file:copied.db?vfs=pagefile&bus=" + cluster.bus());
    db.run("PRAGMA journal_mode=PERSIST; CREATE TABLE u(x); DROP TABLE u;");
    Outcome ls = pagefile_admin(dir.path(), {"ls", "--bus", cluster.bus()});
    std::string mode = db.query("PRAGMA journal_mode");
    std::string names = db.query("SELECT pagefile_names()");
    INFO(ls.out, mode, names);
    for (const char* name : {"copied.db", "copied.db-journal"}) {
      Outcome stat = pagefile_admin(dir.path(), {"stat", name, "--bus", cluster.bus()});
      INFO(name, ": ", stat.err);
      CHECK(stat.exit_status == 0);
      CHECK(stat.out.find("replicas 2\n") != std::string::npos);
    }
  }
  // Page 3's copies (stripe over 3: servers 0 and 1); the one on server 1
  // damaged: read from server 0's.
  uint64_t id = file_id(dir, cluster.bus(), "copied.db");
  damage_page(dir / "s1" / "shares" / fmt::format("{}.pf", id), 3, 100);
  CHECK(read_all(uri).first == SQLITE_OK);
  // Server 2 dies: its pages are read from their other copies.
  cluster.server(2).kill();
  CHECK(read_all(uri).first == SQLITE_OK);
  // A URI asking for another count than the database keeps is refused.
  SqliteDb other("file:copied.db?vfs=pagefile&replicas=1&bus=" + cluster.bus());
  CHECK(other.open_rc() == SQLITE_CANTOPEN);
  cluster.start_again(2);
}
