// Trace capture (vfs/trace_writer.h): a SQLite session captured through
// trace=, PAGEFILE_TRACE or PRAGMA pagefile_trace, replayed by pf-replay
// against a fresh embedded store and against three pagefiled processes,
// gives, exported, the very bytes of the database the session made. A
// capture changes nothing of the database; a trace that cannot be written
// fails the open, naming the path, before the database is touched.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pagefile/pagefile.h"
#include "tests/support/cluster.h"
#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/sqlite_db.h"

using pagefile::test::Outcome;
using pagefile::test::PagefiledCluster;
using pagefile::test::SqliteDb;
using pagefile::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Creates, fills and updates a table of `uri`'s database, in several
// transactions (a rollback journal each, or WAL frames), then closes it.
void session(const std::string& uri, const std::string& journal_mode = "delete") {
  SqliteDb db(uri);
  INFO(db.error());
  REQUIRE(db.open_rc() == SQLITE_OK);
  db.run("PRAGMA journal_mode=" + journal_mode);
  db.run("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT); CREATE INDEX t_body ON t(body);");
  for (int batch = 0; batch < 4; ++batch) {
    db.run(fmt::format("BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<250)"
                       " INSERT INTO t(body) SELECT printf('row %d of batch {} %s', i, zeroblob(60)) FROM n; COMMIT;",
                       batch));
  }
  db.run("UPDATE t SET body = body || ' updated' WHERE id % 7 = 0");
  db.run("DELETE FROM t WHERE id % 11 = 0");
  CHECK(db.query("SELECT count(*) FROM t") == "910");
}

// The bytes of the local database at `path`, page by page (a local
// Pagefile: its pages are the database's bytes).
std::string local_bytes(const fs::path& path) {
  auto client = pagefile::Client::start({});
  REQUIRE(client);
  pagefile::OpenOptions open;
  open.read_only = true;
  auto fd = (*client)->open(path.string(), open);
  INFO(fd.status().to_string());
  REQUIRE(fd);
  auto status = (*client)->status(*fd);
  REQUIRE(status);
  std::string bytes(static_cast<size_t>(status->pages * status->page_size), '\0');
  for (int64_t page = 0; page < status->pages; ++page) {
    std::span<std::byte> out(reinterpret_cast<std::byte*>(bytes.data()) + page * status->page_size, status->page_size);
    REQUIRE((*client)->read(*fd, page, out));
  }
  REQUIRE((*client)->close(*fd));
  return bytes;
}

// Replays `trace` on `bus` (inproc: under `home`) at `concurrency`, exports
// its file `name`, and returns the exported bytes.
std::string replay_and_export(const fs::path& dir, const fs::path& trace, const std::string& bus, int concurrency,
                              const std::string& name) {
  pagefile::test::EnvVars env = {{"PAGEFILE_HOME", (dir / "home").string()}};
  Outcome replay = pagefile::test::pf_replay(
      dir, {"run", trace.string(), "--bus", bus, "--concurrency", std::to_string(concurrency), "--no-progress"}, env);
  INFO(replay.out, replay.err);
  REQUIRE(replay.exit_status == 0);
  CHECK(replay.out.find("0 mismatches, 0 errors") != std::string::npos);
  fs::path out = dir / fmt::format("export-{}.db", concurrency);
  Outcome exported = pagefile::test::pagefile_admin(dir, {"--bus", bus, "export", name, out.string()}, env);
  INFO(exported.out, exported.err);
  REQUIRE(exported.exit_status == 0);
  return pagefile::test::read_file(out);
}

}  // namespace

TEST_CASE("a captured session replays into a store byte-identical to the database it made") {
  pagefile::test::register_without_bus();
  TempDir dir;
  const fs::path db = dir.path() / "app.db";
  const fs::path trace = dir.path() / "app.trace";
  session(fmt::format("file:{}?vfs=pagefile&trace={}", db.string(), trace.string()));
  const std::string made = local_bytes(db);
  REQUIRE(made.size() > 10 * 4096);

  std::string text = pagefile::test::read_file(trace);
  CHECK(text.find("data app.trace.data\n") != std::string::npos);
  CHECK(text.find(fmt::format("# file app.db is {}\n", db.string())) != std::string::npos);
  CHECK(text.find(" open app.db 4096") != std::string::npos);
  // (A local rollback journal has pages of a file-system block: ByteFile::kLocalJournalPageSize.)
  CHECK(text.find(" open app.db-journal 4096") != std::string::npos);
  CHECK(text.find(" unlink app.db-journal\n") != std::string::npos);
  CHECK(text.find(" sync app.db\n") != std::string::npos);
  // A replay over a directory of its own never touches the captured files.
  Outcome local = pagefile::test::pf_replay(dir.path(), {"run", trace.string(), "--dir", (dir.path() / "replayed").string(), "--no-progress"});
  INFO(local.out, local.err);
  REQUIRE(local.exit_status == 0);
  CHECK(local_bytes(dir.path() / "replayed" / "app.db") == made);
  // Again over the store it made: its reads find the application's pages,
  // which this run did not write (no stamps to check, no mismatch).
  Outcome again = pagefile::test::pf_replay(dir.path(), {"run", trace.string(), "--dir", (dir.path() / "replayed").string(), "--no-progress"});
  INFO(again.out, again.err);
  CHECK(again.exit_status == 0);
  CHECK(local_bytes(dir.path() / "replayed" / "app.db") == made);

  SUBCASE("on a fresh embedded store, one page at a time and at concurrency 12") {
    CHECK(replay_and_export(dir.path(), trace, "inproc:4", 1, "app.db") == made);
    fs::remove_all(dir.path() / "home");
    CHECK(replay_and_export(dir.path(), trace, "inproc:4", 12, "app.db") == made);
  }
  SUBCASE("on three pagefiled processes") {
    PagefiledCluster cluster(3);
    CHECK(replay_and_export(dir.path(), trace, cluster.bus(), 8, "app.db") == made);
  }
}

TEST_CASE("a new database given a smaller page size at its first write, with another connection open: the trace opens it again at that size and replays byte-identical") {
  pagefile::test::register_without_bus();
  TempDir dir;
  const fs::path db = dir.path() / "small.db";
  const fs::path trace = dir.path() / "small.trace";
  std::string uri = fmt::format("file:{}?vfs=pagefile&trace={}", db.string(), trace.string());
  {
    SqliteDb early(uri);  // open, and read empty, before the first write
    REQUIRE(early.open_rc() == SQLITE_OK);
    CHECK(early.query("SELECT count(*) FROM sqlite_master") == "0");
    {
      SqliteDb writer(uri);
      writer.run("PRAGMA page_size=512; CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n "
             "WHERE i<100) INSERT INTO t SELECT printf('%0300d', i) FROM n");
    }
    CHECK(early.query("SELECT count(*) FROM t") == "100");
  }
  const std::string made = local_bytes(db);
  CHECK(made.size() % 512 == 0);
  std::string text = pagefile::test::read_file(trace);
  CHECK(text.find(" open small.db 4096") != std::string::npos);  // SQLite's default page size, at open
  CHECK(text.find(" open small.db 512") != std::string::npos);
  Outcome local = pagefile::test::pf_replay(dir.path(), {"run", trace.string(), "--dir", (dir.path() / "replayed").string(), "--no-progress"});
  INFO(local.out, local.err);
  REQUIRE(local.exit_status == 0);
  CHECK(local_bytes(dir.path() / "replayed" / "small.db") == made);
}

TEST_CASE("a capture changes nothing: the same session without one makes the same bytes") {
  pagefile::test::register_without_bus();
  TempDir dir;
  fs::create_directories(dir.path() / "plain");
  fs::create_directories(dir.path() / "traced");
  for (std::string mode : {"delete", "wal"}) {
    CAPTURE(mode);
    const fs::path plain = dir.path() / "plain" / (mode + ".db");
    const fs::path traced = dir.path() / "traced" / (mode + ".db");
    const fs::path trace = dir.path() / (mode + ".trace");
    session("file:" + plain.string() + "?vfs=pagefile", mode);
    session(fmt::format("file:{}?vfs=pagefile&trace={}", traced.string(), trace.string()), mode);
    const std::string made = local_bytes(traced);
    CHECK(local_bytes(plain) == made);
    // WAL frames and checkpoints replay as well as journals do.
    Outcome local = pagefile::test::pf_replay(dir.path(), {"run", trace.string(), "--dir", (dir.path() / ("r-" + mode)).string(), "--concurrency", "4", "--no-progress"});
    INFO(local.out, local.err);
    REQUIRE(local.exit_status == 0);
    CHECK(local_bytes(dir.path() / ("r-" + mode) / (mode + ".db")) == made);
  }
}

TEST_CASE("PRAGMA pagefile_trace starts and stops a capture; PAGEFILE_TRACE captures from the first open") {
  pagefile::test::register_without_bus();
  TempDir dir;
  const fs::path db = dir.path() / "p.db";
  const fs::path trace = dir.path() / "p.trace";
  {
    SqliteDb conn("file:" + db.string() + "?vfs=pagefile");
    REQUIRE(conn.open_rc() == SQLITE_OK);
    conn.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
    CHECK(conn.query("PRAGMA pagefile_trace") == "");
    CHECK(conn.query(fmt::format("PRAGMA pagefile_trace='{}'", trace.string())) == trace.string());
    conn.run("INSERT INTO t VALUES (2)");
    CHECK(conn.query("PRAGMA pagefile_trace") == trace.string());
    CHECK(conn.query("PRAGMA pagefile_trace=''") == "");
    conn.run("INSERT INTO t VALUES (3)");
  }
  std::string text = pagefile::test::read_file(trace);
  // The database was open before the capture: its first operation opens it.
  CHECK(text.find(" open p.db 4096") != std::string::npos);
  CHECK(text.find(" write p.db 0 ") != std::string::npos);
  Outcome replay = pagefile::test::pf_replay(dir.path(), {"run", trace.string(), "--dir", (dir.path() / "r").string(), "--no-progress"});
  INFO(replay.out, replay.err);
  CHECK(replay.exit_status == 0);

  const fs::path env_trace = dir.path() / "env.trace";
  ::setenv("PAGEFILE_TRACE", env_trace.c_str(), 1);
  {
    SqliteDb conn("file:" + (dir.path() / "e.db").string() + "?vfs=pagefile");
    REQUIRE(conn.open_rc() == SQLITE_OK);
    conn.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
  }
  ::unsetenv("PAGEFILE_TRACE");
  CHECK(pagefile::test::read_file(env_trace).find(" open e.db 4096") != std::string::npos);
}

TEST_CASE("a trace that cannot be written fails the open, naming the path, and makes no database") {
  pagefile::test::register_without_bus();
  TempDir dir;
  const fs::path db = dir.path() / "x.db";
  const std::string bad = (dir.path() / "no-such-dir" / "x.trace").string();
  {
    SqliteDb conn(fmt::format("file:{}?vfs=pagefile&trace={}", db.string(), bad));
    CHECK(conn.open_rc() != SQLITE_OK);
    std::string said = conn.error();
    CHECK(said.find(bad) != std::string::npos);
    CHECK_FALSE(fs::exists(db));
  }
  // The next open on this thread is not told of it.
  SqliteDb memory(":memory:", nullptr);
  CHECK(memory.open_rc() == SQLITE_OK);
  // An ATTACH runs no auto-extension: it fails at its first lock, rather
  // than see an empty database.
  CHECK(memory.exec(fmt::format("ATTACH 'file:{}?vfs=pagefile&trace={}' AS b", db.string(), bad)) != SQLITE_OK);
  CHECK_FALSE(fs::exists(db));
  // A trace whose file name has a blank would name its data file so.
  SqliteDb blank(fmt::format("file:{}?vfs=pagefile&trace={}", db.string(), (dir.path() / "my%20trace").string()));
  CHECK(blank.open_rc() != SQLITE_OK);
  CHECK(blank.error().find("may have no blanks") != std::string::npos);

  SqliteDb other("file:" + (dir.path() / "y.db").string() + "?vfs=pagefile");
  REQUIRE(other.open_rc() == SQLITE_OK);
  other.run("CREATE TABLE t(x)");
  CHECK(other.exec(fmt::format("PRAGMA pagefile_trace='{}'", bad)) != SQLITE_OK);
}

TEST_CASE("pf-replay names the line of a malformed captured trace and a data file that ends early") {
  TempDir dir;
  pagefile::test::write_file(dir.path() / "t.data", std::string(4096, 'x'));
  pagefile::test::write_file(dir.path() / "bad.trace", "data t.data\n@0 open a 4096\n@5 write a 0 0\n@4 read a 0\n");
  Outcome bad = pagefile::test::pf_replay(dir.path(), {"run", "bad.trace", "--dir", "r"});
  CHECK(bad.exit_status == 2);
  CHECK(bad.err.find("bad.trace:4: timestamp @4 is before the one of an earlier line (@5)") != std::string::npos);
  // A captured trace is replayed where it is told, with its own pages.
  pagefile::test::write_file(dir.path() / "captured.trace", "data t.data\nopen a 4096\nwrite a 0 0\n");
  Outcome nowhere = pagefile::test::pf_replay(dir.path(), {"run", "captured.trace"});
  CHECK(nowhere.exit_status == 2);
  CHECK(nowhere.err.find("--dir DIR") != std::string::npos);
  Outcome resized = pagefile::test::pf_replay(dir.path(), {"run", "captured.trace", "--dir", "r", "--page-size", "8192"});
  CHECK(resized.exit_status == 2);
  CHECK(resized.err.find("cannot change the pages of a captured trace") != std::string::npos);
  pagefile::test::write_file(dir.path() / "short.trace", "data t.data\nopen a 4096\nwrite a 0 0\nwrite a 1 4096\n");
  Outcome shortened = pagefile::test::pf_replay(dir.path(), {"run", "short.trace", "--dir", "r", "--no-progress"});
  CHECK(shortened.exit_status == 3);
  CHECK(shortened.err.find("short.trace:4: write a 1") != std::string::npos);
  CHECK(shortened.err.find("ends before the 4096 bytes at offset 4096") != std::string::npos);
}

TEST_CASE("--pace captured keeps a trace's timestamps; without it they are ignored") {
  TempDir dir;
  pagefile::test::write_file(dir.path() / "t.trace", "@0 open a 4096\n@1000 write a 0\n@300000 read a 0\n@300001 close a\n");
  Outcome paced = pagefile::test::pf_replay(dir.path(), {"run", "t.trace", "--dir", "r", "--pace", "captured", "--csv", "runs.csv"});
  INFO(paced.out, paced.err);
  REQUIRE(paced.exit_status == 0);
  auto rows = pagefile::test::csv_rows(dir.path() / "runs.csv");
  REQUIRE(rows.size() == 1);
  // (A lower bound only: a replay may be slower, never earlier.)
  CHECK(std::stod(rows[0].at("seconds")) >= 0.3);
  Outcome bad = pagefile::test::pf_replay(dir.path(), {"run", "t.trace", "--pace", "sometimes"});
  CHECK(bad.exit_status == 2);
}
