// The VFS as a drop-in default (issue 19): with no bus configured a database
// is a local Pagefile at its path, shared by processes with SQLite's locking,
// in rollback and in WAL mode (a real -shm; WAL's cases in default_wal_test.cpp).
// Where SQLite's own answer is the point, each case runs on the unix VFS too
// and the two must agree.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "store/disk_faults.h"
#include "tests/support/temp_dir.h"
#include "tests/vfs/embedded_store.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/sqlite_db.h"
#include "tests/vfs/worker.h"
#include "tests/vfs/default_test_util.h"
#include "pagefile/pagefile_vfs.h"

using namespace pagefile::test;
namespace fs = std::filesystem;

TEST_CASE("the default keeps a database at its path: removing or renaming the path removes or renames it") {
  register_without_bus();
  TempDir dir;
  fs::path app = dir / "app.db";
  {
    SqliteDb db(uri(app, "pagefile"));
    REQUIRE(db.open_rc() == SQLITE_OK);
    db.run("CREATE TABLE t(x); INSERT INTO t VALUES(42)");
    CHECK(db.query("SELECT pagefile_exists('" + app.string() + "')") == "1");
  }
  CHECK(fs::is_regular_file(app));
  CHECK_FALSE(fs::exists(dir / "pagefile-home"));  // no in-process cluster was started
  fs::path moved = dir / "moved.db";
  fs::rename(app, moved);
  {
    SqliteDb db(uri(moved, "pagefile"));
    CHECK(db.query("SELECT x FROM t") == "42");
  }
  {
    SqliteDb db(uri(app, "pagefile"));  // a fresh database where the old one was
    CHECK(db.query("SELECT count(*) FROM sqlite_master") == "0");
  }
  fs::remove(moved);
  SqliteDb again(uri(moved, "pagefile"));
  CHECK(again.query("SELECT count(*) FROM sqlite_master") == "0");
}

TEST_CASE("a TRUNCATE-mode journal after its commit is no journal, as on unix: its file holds its header only") {
  register_without_bus();
  TempDir dir;
  for (const char* vfs : {"unix", "pagefile"}) {
    CAPTURE(vfs);
    fs::path db_path = dir / fmt::format("{}.db", vfs);
    SqliteDb db(uri(db_path, vfs));
    REQUIRE(db.open_rc() == SQLITE_OK);
    CHECK(db.query("PRAGMA journal_mode=TRUNCATE") == "truncate");
    db.run("CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    db.run("BEGIN; INSERT INTO t SELECT randomblob(3000) FROM t; INSERT INTO t SELECT randomblob(3000) FROM t; COMMIT");
    const std::string journal = db_path.string() + "-journal";
    REQUIRE(fs::exists(journal));
    sqlite3_vfs* v = sqlite3_vfs_find(vfs);
    REQUIRE(v != nullptr);
    int exists = -1;
    REQUIRE(v->xAccess(v, journal.c_str(), SQLITE_ACCESS_EXISTS, &exists) == SQLITE_OK);
    CHECK(exists == 0);
    // (unix: empty; pagefile: its 4 KiB header, no checksum block left.)
    CHECK(fs::file_size(journal) == (std::string(vfs) == "unix" ? 0u : 4096u));
    CHECK(db.query("SELECT count(*) FROM t") == "4");
  }
}

TEST_CASE("paths: a directory, a missing directory, a read-only directory, mode=ro, an empty or foreign file: the unix VFS's answers") {
  register_without_bus();
  TempDir dir;
  for (const char* vfs : {"unix", "pagefile"}) fs::create_directories(dir / vfs / "a-directory");
  auto both = [&](const std::string& name, const std::string& params, int flags, auto&& prepare) {
    std::string got[2];
    int k = 0;
    for (const char* vfs : {"unix", "pagefile"}) {
      fs::path path = dir / vfs / name;
      prepare(dir / vfs);
      got[k++] = answers(uri(path, vfs, params), flags);
    }
    CAPTURE(name);
    CAPTURE(params);
    CHECK(got[1] == got[0]);
    return got[0];
  };
  const int rwc = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  auto nothing = [](const fs::path&) {};
  // SQLite's answers, as the unix VFS gives them:
  CHECK(both("a-directory", "", rwc, nothing) == "open=14");  // SQLITE_CANTOPEN
  CHECK(both("no-such-dir/x.db", "", rwc, nothing) == "open=14");
  CHECK(both("missing.db", "&mode=ro", SQLITE_OPEN_READONLY, nothing) == "open=14");
  CHECK(both("missing2.db", "", SQLITE_OPEN_READONLY, nothing) == "open=14");
  both("made.db", "", rwc, nothing);
  CHECK(both("made.db", "&mode=ro", SQLITE_OPEN_READONLY, nothing) == "open=0 write=8 read=0");  // SQLITE_READONLY
  // An empty file is an empty database; a file of something else is not a
  // database (and is left as it was).
  auto empty_file = [](const fs::path& base) { std::ofstream(base / "empty.db").close(); };
  CHECK(both("empty.db", "", rwc, empty_file) == "open=0 write=0 read=0");
  // Opened read-only it is an empty database too, which refuses writes.
  auto empty_ro_file = [](const fs::path& base) { std::ofstream(base / "empty-ro.db").close(); };
  CHECK(both("empty-ro.db", "&mode=ro", SQLITE_OPEN_READONLY, empty_ro_file) == "open=0 write=8 read=0");
  CHECK(fs::file_size(dir / "pagefile" / "empty-ro.db") == 0);
  const std::string text = "This file is not a valid SQLite database\n";
  auto text_file = [&](const fs::path& base) { std::ofstream(base / "text.db") << text; };
  CHECK(both("text.db", "", rwc, text_file).find("=26") != std::string::npos);  // SQLITE_NOTADB
  CHECK(read_file(dir / "pagefile" / "text.db") == text);
  // A read-only directory (root writes there anyway, as with unix).
  auto read_only_dir = [](const fs::path& base) {
    fs::create_directories(base / "ro");
    ::chmod((base / "ro").c_str(), 0555);
  };
  both("ro/x.db", "", rwc, read_only_dir);
  for (const char* vfs : {"unix", "pagefile"}) ::chmod((dir / vfs / "ro").c_str(), 0755);
}

TEST_CASE("an ordinary SQLite database in WAL mode, a commit still in its -wal: read through the unix VFS, its files untouched") {
  register_without_bus();
  // Only the database went to the unix VFS: its -wal went to the store,
  // which refused it as damaged (SQLITE_CORRUPT, "malformed"), where unix
  // reads the commit (found by an independent review).
  TempDir dir;
  const std::string path = (dir / "plain.db").string();
  SqliteDb writer(path, "unix");
  writer.run("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(v TEXT); INSERT INTO t VALUES('base');"
             "PRAGMA wal_checkpoint(TRUNCATE); INSERT INTO t VALUES('committed-in-wal');");
  REQUIRE(fs::file_size(path + "-wal") > 0);
  const std::string db_bytes = read_file(path);
  const std::string wal_bytes = read_file(path + "-wal");
  for (const char* vfs : {"unix", "pagefile"}) {
    CAPTURE(vfs);
    SqliteDb reader("file:" + path + "?vfs=" + vfs, nullptr);
    REQUIRE(reader.open_rc() == SQLITE_OK);
    CHECK(reader.query("SELECT group_concat(v) FROM t") == "base,committed-in-wal");
  }
  CHECK(read_file(path) == db_bytes);
  CHECK(read_file(path + "-wal") == wal_bytes);
}

TEST_CASE("an empty -journal or -wal at the path (a process died as it made it) is none, as on unix") {
  // A new file is made empty at its path and given its header after: a
  // process killed in between leaves an empty file, which must read as the
  // unix VFS reads an empty journal or WAL.
  register_without_bus();
  TempDir dir;
  for (const char* mode : {"delete", "wal"}) {
    std::string got[2];
    int k = 0;
    for (const char* vfs : {"unix", "pagefile"}) {
      fs::path path = dir / fmt::format("{}-{}.db", vfs, mode);
      std::string db_uri = new_counter_db(path, mode, vfs);
      std::ofstream(path.string() + (std::string(mode) == "wal" ? "-wal" : "-journal")).close();
      std::string seen;
      {
        SqliteDb ro(db_uri + "&mode=ro", nullptr, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
        REQUIRE(ro.open_rc() == SQLITE_OK);
        seen += "ro:" + ro.query("SELECT n FROM c") + " ";
      }
      SqliteDb db(db_uri, nullptr);
      REQUIRE(db.open_rc() == SQLITE_OK);
      seen += "read:" + db.query("SELECT n FROM c") + " ";
      seen += fmt::format("write:{} ", db.exec("UPDATE c SET n = n + 1"));
      seen += "after:" + db.query("SELECT n FROM c") + " " + db.query("PRAGMA integrity_check");
      got[k++] = seen;
    }
    CAPTURE(mode);
    CHECK(got[0] == "ro:0 read:0 write:0 after:1 ok");
    CHECK(got[1] == got[0]);
  }
}

TEST_CASE("PRAGMA page_size=512 on a new database: its size is whole SQLite pages, as on unix; a connection that opened it empty reads it") {
  register_without_bus();
  TempDir dir;
  for (const std::string mode : {"delete", "wal"}) {
    std::map<std::string, std::string> seen;
    for (const char* vfs : {"unix", "pagefile"}) {
      CAPTURE(mode);
      CAPTURE(vfs);
      fs::path path = dir / fmt::format("{}-{}.db", vfs, mode);
      SqliteDb early(uri(path, vfs));  // opened (and read) while the database is empty
      REQUIRE(early.open_rc() == SQLITE_OK);
      CHECK(early.query("SELECT count(*) FROM sqlite_master") == "0");
      {
        SqliteDb db(uri(path, vfs));
        db.run("PRAGMA page_size=512");
        CHECK(db.query("PRAGMA journal_mode=" + mode) == mode);
        db.run("CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 170) "
               "INSERT INTO t SELECT printf('%0400d', i) FROM n");
      }
      std::string rows = early.query("SELECT count(*) || ' ' || sum(length(x)) FROM t");
      CHECK(rows == "170 68000");
      CHECK(early.query("PRAGMA page_size") == "512");
      CHECK(early.query("PRAGMA integrity_check") == "ok");
      SqliteDb sizes(":memory:", nullptr);
      std::string size = std::string(vfs) == "unix"
                             ? std::to_string(fs::file_size(path))
                             : sizes.query("SELECT pagefile_size('" + path.string() + "')");
      seen[vfs] = size + " bytes, " + rows;
    }
    CHECK(seen["pagefile"] == seen["unix"]);
    CHECK(std::stoll(seen["unix"]) % 512 == 0);
  }
}

TEST_CASE("a page_size= of the user's stays; a relative name stays the file at its path after a chdir, as on unix") {
  register_without_bus();
  TempDir dir;
  {
    // The user chose the Pagefile's page size: SQLite's smaller one does not change it.
    std::string db_uri = uri(dir / "chosen.db", "pagefile", "&page_size=4096");
    for (int open = 0; open < 2; ++open) {
      SqliteDb db(db_uri);
      REQUIRE(db.open_rc() == SQLITE_OK);
      if (open == 0) db.run("PRAGMA page_size=1024; CREATE TABLE t(x); INSERT INTO t VALUES(7)");
      CHECK(db.query("SELECT x FROM t") == "7");
    }
  }
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  fs::path before = fs::current_path();
  fs::current_path(dir / "a");
  {
    SqliteDb db("x.db", "pagefile");
    REQUIRE(db.open_rc() == SQLITE_OK);
    CHECK(std::string(sqlite3_db_filename(db.get(), "main")) == (dir / "a" / "x.db").string());
    db.run("CREATE TABLE t(x); INSERT INTO t VALUES('in a')");
    fs::current_path(dir / "b");
    // The open connection goes on with its file (and its journal beside it).
    db.run("INSERT INTO t VALUES('still a')");
    SqliteDb by_path((dir / "a" / "x.db").string(), "pagefile");
    CHECK(by_path.query("SELECT group_concat(x) FROM t") == "in a,still a");
    SqliteDb here("x.db", "pagefile");  // b's own x.db, new
    CHECK(here.query("SELECT count(*) FROM sqlite_master") == "0");
  }
  fs::current_path(before);
  CHECK(fs::exists(dir / "a" / "x.db"));
  CHECK_FALSE(fs::exists(dir / "a" / "x.db-journal"));
  CHECK_FALSE(fs::exists(dir / "b" / "x.db-journal"));
}

TEST_CASE("two processes on a default database: SQLITE_BUSY with no timeout, success once the holder commits") {
  register_without_bus();
  for (std::string mode : {"delete", "wal"}) {
    for (std::string vfs : {"unix", "pagefile"}) {
      CAPTURE(mode);
      CAPTURE(vfs);
      TempDir dir;
      std::string db_uri = new_counter_db(dir / "shared.db", mode, vfs);
      // It holds until told (the file "release"), at most a minute.
      pid_t holder = start_worker(dir / "holder.txt", {db_uri, "hold-write", "60000", (dir / "release").string()});
      REQUIRE(wait_for_text(dir / "holder.txt", "holding"));
      // Another process, then this one, without a busy timeout: busy.
      Outcome other = run_program(binary_from_env("VFS_WORKER"), dir.path(), {db_uri, "try-write"});
      CHECK(other.out == "rc=5\n");
      SqliteDb db(db_uri, nullptr);
      CHECK(db.exec("BEGIN IMMEDIATE") == SQLITE_BUSY);
      // With one, it waits for the holder's COMMIT and goes on: both
      // transactions count.
      std::ofstream(dir / "release").close();
      sqlite3_busy_timeout(db.get(), 20000);
      db.run("BEGIN IMMEDIATE; UPDATE c SET n = n + 10; COMMIT");
      CHECK(wait_worker(holder) == 0);
      CHECK(read_file(dir / "holder.txt") == "holding\ncommitted\n");
      CHECK(counter(db_uri) == "11");
    }
  }
}

TEST_CASE("four processes add 1000 to a default database's counter: no update is lost") {
  register_without_bus();
  // (In PERSIST and TRUNCATE mode each transaction's journal is written
  // over, or cut back, by the next process's.)
  for (std::string mode : {"delete", "wal", "persist", "truncate"}) {
    CAPTURE(mode);
    TempDir dir;
    std::string db_uri = new_counter_db(dir / "count.db", mode);
    run_together(dir, 4, {db_uri, "increment", "250", mode});
    CHECK(counter(db_uri) == "1000");
  }
  // With synchronous=OFF nothing is synced: each commit reaches the
  // others through the page cache alone, as on unix.
  for (std::string mode : {"delete", "wal"}) {
    CAPTURE(mode);
    TempDir dir;
    std::string db_uri = new_counter_db(dir / "count-nosync.db", mode);
    run_together(dir, 4, {db_uri, "increment", "250", mode, "OFF"});
    CHECK(counter(db_uri) == "1000");
  }
}

TEST_CASE("under the database's write lock its journal reads nothing before its pages' writes: no one else writes it then") {
  register_without_bus();
  // (Not PERSIST: there the next transaction's records go over the last
  // one's, and a record's page held in part is read to be completed.) With
  // a reader's statement open throughout, SQLite keeps a TRUNCATE journal
  // open from one write lock to the next: told at each, not only at open.
  for (std::string mode : {"delete", "truncate", "truncate, a statement open"}) {
    CAPTURE(mode);
    TempDir dir;
    SqliteDb db(uri(dir / "j.db", "pagefile"));
    REQUIRE(db.open_rc() == SQLITE_OK);
    const std::string journal_mode = mode.substr(0, mode.find(','));
    CHECK(db.query("PRAGMA journal_mode=" + journal_mode) == journal_mode);
    db.run("CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB); CREATE TABLE r(x);"
           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)"
           " INSERT INTO t SELECT i, zeroblob(3000) FROM n;"
           "INSERT INTO r VALUES(1), (2);");
    sqlite3_stmt* open_read = nullptr;
    if (mode.find("statement") != std::string::npos) {
      REQUIRE(sqlite3_prepare_v2(db.get(), "SELECT x FROM r", -1, &open_read, nullptr) == SQLITE_OK);
      REQUIRE(sqlite3_step(open_read) == SQLITE_ROW);  // (holds SHARED until finalized)
    }
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      CHECK(db.query("SELECT count(*) FROM t WHERE length(pad) >= 3000") == "100");  // every page in SQLite's cache
      db.run("BEGIN IMMEDIATE");
      // The journal opened, and its first pages written (more than 16 held
      // back are written out).
      db.run(fmt::format("UPDATE t SET pad = randomblob(3000 + {}) WHERE id <= 30", round));
      // Every disk read fails from here: the journal's next pages (records
      // of the other 70 pages) must be written without reading their old
      // checksums.
      pagefile::DiskFaults::arm(pagefile::DiskOp::kRead, 1, pagefile::DiskFault::kEio, /*sticky=*/true);
      int rc = db.exec(fmt::format("UPDATE t SET pad = randomblob(3000 + {}) WHERE id > 30", round));
      pagefile::DiskFaults::disarm();
      std::string why = rc == SQLITE_OK ? "" : db.query("PRAGMA pagefile_last_error");
      INFO(db.error(), ": ", why);
      CHECK(rc == SQLITE_OK);
      db.run("COMMIT");
      CHECK(db.query("SELECT count(*) FROM t WHERE length(pad) = " + std::to_string(3000 + round)) == "100");
      CHECK(db.query("PRAGMA integrity_check") == "ok");
    }
    sqlite3_finalize(open_read);
  }
}

TEST_CASE("a rollback journal's header rewritten at a sync takes its length page along: one run of the disk") {
  register_without_bus();
  // What the VFS sends the store is in the trace (trace=): between the
  // journal's syncs of a commit, the header (page 1) changes, then the
  // length page (page 0, between the checksum block and page 1 on the
  // disk) is written too. PERSIST's zeroed header at the commit likewise.
  TempDir dir;
  const fs::path trace = dir / "t.trace";
  {
    SqliteDb db(uri(dir / "j.db", "pagefile", "&trace=" + trace.string()));
    REQUIRE(db.open_rc() == SQLITE_OK);
    db.run("CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    CHECK(db.query("PRAGMA journal_mode=persist") == "persist");
    db.run("INSERT INTO t VALUES(2)");
    CHECK(db.query("SELECT sum(x) FROM t") == "3");
    CHECK(db.query("PRAGMA integrity_check") == "ok");
  }
  // The journal's writes since its last sync, at each of its syncs.
  std::ifstream in(trace);
  std::vector<std::string> batches;
  std::string line, batch;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string at, op, file, page;
    words >> at >> op >> file >> page;
    if (file != "j.db-journal") continue;
    if (op == "write") batch += (batch.empty() ? "" : " ") + page;
    if (op == "sync") batches.push_back(std::exchange(batch, ""));
  }
  // Two commits in DELETE mode (the journal's records and length, then its
  // header), one in PERSIST (the same, then the header zeroed).
  CHECK(batches == std::vector<std::string>{"1 0", "1 0", "1 2 3 0", "1 0", "1 2 3 0", "1 0", "1 0"});
}

TEST_CASE("a database opened through a symbolic link is the file it points to, with one WAL and -shm: the unix VFS's answers") {
  register_without_bus();
  // Named apart, each name had its own -wal and -shm over one database:
  // two wal-indexes, and a connection by the link missed the others'
  // commits (found by an independent review). xFullPathname resolves links
  // as unixFullPathname does, and SQLite names the WAL after its answer.
  for (std::string vfs : {"unix", "pagefile"}) {
    CAPTURE(vfs);
    TempDir dir;
    const fs::path real = dir / "real.db";
    fs::create_directory(dir / "sub");
    fs::create_symlink("real.db", dir / "alias.db");
    fs::create_directory_symlink(dir / "sub", dir / "linked");
    SqliteDb a(uri(real, vfs), nullptr);
    REQUIRE(a.open_rc() == SQLITE_OK);
    CHECK(a.query("PRAGMA journal_mode=wal") == "wal");
    a.run("CREATE TABLE t(v); INSERT INTO t VALUES(1)");
    // By the link, and by a path through a linked directory and "..".
    SqliteDb b(uri(dir / "alias.db", vfs), nullptr);
    SqliteDb c(uri(dir / "linked" / ".." / "alias.db", vfs), nullptr);
    REQUIRE(b.open_rc() == SQLITE_OK);
    REQUIRE(c.open_rc() == SQLITE_OK);
    CHECK(std::string(sqlite3_db_filename(b.get(), "main")) == real.string());
    CHECK(b.query("SELECT max(v) FROM t") == "1");
    a.run("INSERT INTO t VALUES(2)");
    CHECK(b.query("SELECT max(v) FROM t") == "2");
    b.run("INSERT INTO t VALUES(10)");
    CHECK(a.query("SELECT max(v) FROM t") == "10");
    CHECK(c.query("SELECT count(*), max(v) FROM t") == "3|10");
    CHECK_FALSE(fs::exists(dir / "alias.db-wal"));
    CHECK_FALSE(fs::exists(dir / "alias.db-shm"));
    // ".." after a link goes up from where the link leads, as on unix.
    fs::create_directories(dir / "other" / "deep");
    fs::create_directory_symlink(dir / "other" / "deep", dir / "jump");
    {
      SqliteDb up(uri(dir / "jump" / ".." / "x.db", vfs), nullptr);
      REQUIRE(up.open_rc() == SQLITE_OK);
      up.run("CREATE TABLE u(x)");
    }
    CHECK(fs::exists(dir / "other" / "x.db"));
    CHECK_FALSE(fs::exists(dir / "x.db"));
    // SQLITE_OPEN_NOFOLLOW refuses the link.
    SqliteDb nofollow(uri(dir / "alias.db", vfs), nullptr, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW);
    CHECK(nofollow.open_rc() == SQLITE_CANTOPEN);
  }
}
