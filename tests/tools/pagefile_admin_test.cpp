// The admin CLI `pagefile` against two real pagefiled processes: an SQLite
// database imported and exported byte for byte, and every subcommand with
// its errors.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

#include "pagefile/pagefile.h"
#include "tests/support/page_file.h"
#include "tests/support/server_process.h"
#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"

using namespace pagefile::test;

namespace {

Outcome admin(const TempDir& dir, const std::vector<std::string>& args) {
  return pagefile_admin(dir.path(), args);
}

// `pagefile ARGS` succeeds and prints each of `expected` somewhere in its
// output.
void check_prints(const TempDir& dir, const std::vector<std::string>& args,
                  const std::vector<std::string>& expected) {
  Outcome outcome = admin(dir, args);
  INFO(fmt::format("pagefile {}", fmt::join(args, " ")));
  INFO(outcome.err);
  INFO(outcome.out);
  CHECK(outcome.exit_status == 0);
  for (const std::string& part : expected) {
    CHECK_MESSAGE(outcome.out.find(part) != std::string::npos, part);
  }
}

// A real SQLite database with 8 KiB pages and enough rows for many pages.
void make_database(const std::filesystem::path& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const char* sql =
      "PRAGMA page_size=8192;"
      "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<3000)"
      " INSERT INTO t SELECT i, printf('row %d %s', i, hex(randomblob(40))) FROM n;";
  char* error = nullptr;
  REQUIRE_MESSAGE(sqlite3_exec(db, sql, nullptr, nullptr, &error) == SQLITE_OK, (error ? error : ""));
  sqlite3_close(db);
}

// Runs `sql` on the database at `path` through SQLite's unix VFS; the rows
// it gives, each as its columns' text joined by '|', one a line.
std::string sqlite_rows(const std::filesystem::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, "unix") == SQLITE_OK);
  std::string rows;
  auto add_row = [](void* out, int columns, char** values, char**) {
    std::string& text = *static_cast<std::string*>(out);
    for (int i = 0; i < columns; ++i) text += fmt::format("{}{}", i > 0 ? "|" : "", values[i] ? values[i] : "NULL");
    text += "\n";
    return 0;
  };
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), add_row, &rows, &error);
  INFO(sql, (error ? error : ""));
  CHECK(rc == SQLITE_OK);
  sqlite3_free(error);
  sqlite3_close(db);
  return rows;
}

// Runs `sql` on the database at `path` in a child process that then dies
// without closing it, as a crash would leave it (a WAL not checkpointed,
// a hot journal).
void run_and_die(const std::filesystem::path& path, const std::string& sql) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix") != SQLITE_OK) ::_exit(1);
    ::_exit(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK ? 0 : 2);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

// Names in `dir` that start with `prefix`.
std::vector<std::string> names_starting(const std::filesystem::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("pagefile: import, ls, stat, locks, status, export, rm against two pagefiled") {
  TempDir dir;
  ServerProcess a(fmt::format("tcp://127.0.0.1:{}", free_tcp_port()), dir / "a");
  ServerProcess b(fmt::format("unix:{}", (dir / "b.sock").string()), dir / "b");
  std::string bus = a.address() + "," + b.address();

  make_database(dir / "app.db");
  Outcome imported = admin(dir, {"import", "app.db", "app", "--bus", bus, "--placement", "hash"});
  INFO(imported.err);
  REQUIRE(imported.exit_status == 0);
  CHECK(imported.out.find("pages of 8192 B") != std::string::npos);  // the database's own page size

  Outcome again = admin(dir, {"import", "app.db", "app", "--bus", bus});
  CHECK(again.exit_status == 1);
  CHECK(again.err.find("AlreadyExists") != std::string::npos);

  check_prints(dir, {"ls", "--bus", bus}, {"app", "hash"});
  check_prints(dir, {"stat", "app", "--bus", bus},
               {"page size 8192 B", b.address(), "policy random (min 0, max 0)",
                // Each server's pool took the file (the import wrote to both)
                // under its policy.
                a.address() + ": policy random: hits 0, misses 0",
                b.address() + ": policy random: hits 0, misses 0"});
  check_prints(dir, {"locks", "--bus", bus}, {"0 lock(s)"});
  check_prints(dir, {"status", "--bus", bus},
               {"2 of 2 servers up", "(catalog)", "pool ", " policy random: hits "});

  Outcome exported = admin(dir, {"export", "app", "copy.db", "--bus", bus});
  REQUIRE(exported.exit_status == 0);
  CHECK(read_file(dir / "copy.db") == read_file(dir / "app.db"));

  // The exported copy is a working database with every row.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open((dir / "copy.db").c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(sqlite3_column_int(st, 0) == 3000);
  sqlite3_finalize(st);
  sqlite3_close(db);

  // Two copies of each page, one on each server: stat and ls say so, and
  // the copy exports byte for byte.
  Outcome copied = admin(dir, {"import", "app.db", "copied", "--bus", bus, "--replicas", "2"});
  INFO(copied.err);
  REQUIRE(copied.exit_status == 0);
  check_prints(dir, {"stat", "copied", "--bus", bus}, {"replicas 2\n"});
  check_prints(dir, {"ls", "--bus", bus}, {"on 2 servers, 2 copies  copied"});
  REQUIRE(admin(dir, {"export", "copied", "copied.db", "--bus", bus}).exit_status == 0);
  CHECK(read_file(dir / "copied.db") == read_file(dir / "app.db"));
  Outcome three = admin(dir, {"import", "app.db", "three", "--bus", bus, "--replicas", "3"});
  CHECK(three.exit_status == 1);
  CHECK(three.err.find("needs 3 servers") != std::string::npos);

  Outcome rm = admin(dir, {"rm", "app", "--bus", bus});
  CHECK(rm.exit_status == 0);
  Outcome gone = admin(dir, {"stat", "app", "--bus", bus});
  CHECK(gone.exit_status == 1);
  CHECK(gone.err.find("NotFound") != std::string::npos);
  CHECK(admin(dir, {"rm", "app", "--bus", bus}).exit_status == 1);
  CHECK(admin(dir, {"export", "app", "x.db", "--bus", bus}).exit_status == 1);
  CHECK(admin(dir, {"import", "missing.db", "m", "--bus", bus}).exit_status == 1);
}

TEST_CASE("pagefile: a server down shows in status; bad usage exits 2") {
  TempDir dir;
  ServerProcess a(fmt::format("tcp://127.0.0.1:{}", free_tcp_port()), dir / "a");
  std::string bus = a.address() + fmt::format(",tcp://127.0.0.1:{}", free_tcp_port());
  Outcome status = admin(dir, {"status", "--bus", bus});
  CHECK(status.exit_status == 1);
  CHECK(status.out.find("DOWN") != std::string::npos);
  CHECK(status.out.find("1 of 2 servers up") != std::string::npos);
  CHECK(admin(dir, {"frobnicate"}).exit_status != 0);
  CHECK(admin(dir, {"stat"}).exit_status != 0);
  Outcome bad_bus = admin(dir, {"ls", "--bus", "tcp://nowhere"});
  CHECK(bad_bus.exit_status == 1);
  CHECK(bad_bus.err.find("InvalidArgument") != std::string::npos);
}

TEST_CASE("a question put to a server that is not the catalog leaves it as it was") {
  // `pagefile status --bus` of one server made it the catalog of a new
  // cluster, and every request of the real one failed there after as stale.
  TempDir dir;
  ServerProcess a(fmt::format("tcp://127.0.0.1:{}", free_tcp_port()), dir / "a");
  ServerProcess b(fmt::format("tcp://127.0.0.1:{}", free_tcp_port()), dir / "b");
  for (const auto& question : std::vector<std::vector<std::string>>{{"status"}, {"ls"}, {"locks"}, {"stat", "f"}}) {
    std::vector<std::string> args = question;
    args.insert(args.end(), {"--bus", b.address()});
    Outcome asked = admin(dir, args);
    INFO(asked.out, asked.err);
    CHECK(asked.exit_status == (question[0] == "stat" ? 1 : 0));
    if (question[0] == "stat") CHECK(asked.err.find("this server holds none") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "b" / "catalog.db"));
  CHECK_FALSE(std::filesystem::exists(dir / "b" / "cluster"));
  // The cluster whose catalog is a: every page on b too.
  const std::string bus = a.address() + "," + b.address();
  generate_trace(dir.path(), "fill.trace",
                 {"--pattern", "sequential", "--file", "f", "--file-pages", "16", "--ops", "16", "--write-ratio", "1"});
  Outcome fill = pf_replay(dir.path(), {"run", "fill.trace", "--bus", bus, "--no-progress"});
  INFO(fill.out, fill.err);
  CHECK(fill.exit_status == 0);
  Outcome listed = admin(dir, {"ls", "--bus", bus});
  CHECK(listed.out.find("f") != std::string::npos);
}

TEST_CASE("one server per directory: a second pagefiled, or an embedded bus on a home in use, is refused by name") {
  TempDir dir;
  std::filesystem::path home = dir / "home";
  auto first = std::make_unique<ServerProcess>(fmt::format("tcp://127.0.0.1:{}", free_tcp_port()),
                                               home / "server-0");
  std::string holder = fmt::format("pid {}", first->pid());

  Outcome second = run_program(
      binary_from_env("PAGEFILED"), dir.path(),
      {"--listen", fmt::format("tcp://127.0.0.1:{}", free_tcp_port()), "--dir", (home / "server-0").string()});
  CHECK(second.exit_status != 0);
  CHECK_MESSAGE(second.err.find("in use by another page server (" + holder + ")") != std::string::npos, second.err);

  // The embedded default under the same home would run a second catalog
  // (its own locks and leases) over the same files: refused, with nothing
  // changed.
  Outcome embedded = pagefile_admin(
      dir.path(), {"ls"}, {{"PAGEFILE_HOME", home.string()}, {"PAGEFILE_BUS", ""}});
  CHECK(embedded.exit_status == 1);
  CHECK_MESSAGE(embedded.err.find(holder) != std::string::npos, embedded.err);

  // Once the holder is gone (even killed: the kernel drops the lock), the
  // directory serves again.
  first->kill();
  first.reset();
  Outcome after = pagefile_admin(
      dir.path(), {"ls"}, {{"PAGEFILE_HOME", home.string()}, {"PAGEFILE_BUS", ""}});
  CHECK_MESSAGE(after.exit_status == 0, after.err);
}

TEST_CASE("pagefile import refuses what is not a regular file and leaves no record when it fails; export keeps holes and checks room first") {
  TempDir dir;
  ServerProcess a(fmt::format("unix:{}", (dir / "a.sock").string()), dir / "a");
  auto b = std::make_unique<ServerProcess>(fmt::format("unix:{}", (dir / "b.sock").string()), dir / "b");
  const std::string bus = a.address() + "," + b->address();

  // A directory and a FIFO (which must not be waited on for a writer).
  std::filesystem::create_directory(dir / "folder");
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  for (const char* what : {"folder", "pipe"}) {
    CAPTURE(what);
    Outcome refused = admin(dir, {"import", what, what, "--bus", bus});
    CHECK(refused.exit_status == 1);
    CHECK(refused.err.find("is not a regular file") != std::string::npos);
  }

  // 40 KiB with a hole of zeros in the middle: exported back byte for byte,
  // the zeros as a hole.
  {
    std::ofstream out(dir / "sparse.bin", std::ios::binary);
    std::string text(8192, 'x');
    out << text << std::string(8192 * 3, '\0') << text;
  }
  REQUIRE(admin(dir, {"import", "sparse.bin", "sparse", "--bus", bus, "--page-size", "8192"}).exit_status == 0);
  Outcome exported = admin(dir, {"export", "sparse", "back.bin", "--bus", bus});
  INFO(exported.err);
  REQUIRE(exported.exit_status == 0);
  CHECK(read_file(dir / "back.bin") == read_file(dir / "sparse.bin"));
  struct stat st {};
  REQUIRE(::stat((dir / "back.bin").c_str(), &st) == 0);
  CHECK(st.st_size == 5 * 8192);
  CHECK(st.st_blocks * 512 < st.st_size);  // the three pages of zeros take no blocks

  // 64 MiB, mostly a hole, and a page of zeros written as data: the import
  // sends the two pages of text alone, the servers hold about that, and the
  // file reads back whole.
  {
    const off_t size = off_t{64} << 20;
    const int fd = ::open((dir / "holes.bin").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    REQUIRE(fd >= 0);
    const std::string text(8192, 'y');
    const std::string zeros(8192, '\0');
    CHECK(::pwrite(fd, text.data(), text.size(), 8192 * 5) == 8192);
    CHECK(::pwrite(fd, zeros.data(), zeros.size(), 8192 * 6) == 8192);
    CHECK(::pwrite(fd, text.data(), text.size(), size - 8192) == 8192);
    ::close(fd);
  }
  auto server_bytes = [&] {
    int64_t bytes = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
      struct stat f {};
      const std::string top = std::filesystem::relative(e.path(), dir.path()).begin()->string();
      if ((top == "a" || top == "b") && e.is_regular_file() && ::stat(e.path().c_str(), &f) == 0) {
        bytes += f.st_blocks * 512;
      }
    }
    return bytes;
  };
  const int64_t before = server_bytes();
  Outcome holes = admin(dir, {"import", "holes.bin", "holes", "--bus", bus, "--page-size", "8192"});
  INFO(holes.err);
  REQUIRE(holes.exit_status == 0);
  CHECK(holes.out.find("8192 pages of 8192 B, 8190 of them zeros, not sent") != std::string::npos);
  CHECK(server_bytes() - before < 2 * 1024 * 1024);
  REQUIRE(admin(dir, {"export", "holes", "holes-back.bin", "--bus", bus}).exit_status == 0);
  CHECK(read_file(dir / "holes-back.bin") == read_file(dir / "holes.bin"));

  // A file far larger than the disk (its size set, its pages never
  // written): export refuses before it writes a byte.
  {
    auto client = pagefile::Client::start({.bus = bus});
    REQUIRE_OK(client);
    auto fd = (*client)->open("huge", {.location = pagefile::Location::kRemote, .page_size = 65536, .create = true});
    REQUIRE_OK(fd);
    REQUIRE_OK((*client)->truncate(*fd, pagefile::kMaxPageNumber + 1));
    REQUIRE_OK((*client)->close(*fd));
  }
  Outcome too_big = admin(dir, {"export", "huge", "huge.bin", "--bus", bus});
  CHECK(too_big.exit_status == 1);
  CHECK(too_big.err.find("NoSpace") != std::string::npos);
  CHECK(too_big.err.find("free") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "huge.bin"));

  // An import that fails half way (one of its servers is gone) takes its
  // record away again.
  b.reset();
  make_database(dir / "app.db");
  Outcome failed = admin(dir, {"import", "app.db", "app", "--bus", bus, "--placement", "hash"});
  CHECK(failed.exit_status == 1);
  Outcome listed = admin(dir, {"stat", "app", "--bus", bus});
  CHECK(listed.exit_status == 1);
  CHECK(listed.err.find("NotFound") != std::string::npos);
}

TEST_CASE("pagefiled refuses to start on a damaged catalog, saying what to do; a sound one serves again") {
  TempDir dir;
  const std::filesystem::path server_dir = dir / "server";
  {
    ServerProcess server(fmt::format("unix:{}", (dir / "s.sock").string()), server_dir);
    std::ofstream(dir / "one.bin") << std::string(8192, 'x');
    REQUIRE(admin(dir, {"import", "one.bin", "one", "--bus", server.address()}).exit_status == 0);
    REQUIRE(server.stop() == 0);
  }
  const std::string good = read_file(server_dir / "catalog.db");
  REQUIRE(good.size() > 4096);
  auto start = [&] {
    return run_program(binary_from_env("PAGEFILED"), dir.path(),
                       {"--listen", fmt::format("unix:{}", (dir / "t.sock").string()), "--dir", server_dir.string()});
  };
  // Garbage over its second page (a table's), then over its header.
  for (size_t at : {size_t{4096}, size_t{0}}) {
    CAPTURE(at);
    std::string damaged = good;
    for (size_t i = at; i < at + 512; ++i) damaged[i] = static_cast<char>(i * 131 + 7);
    std::ofstream(server_dir / "catalog.db", std::ios::binary | std::ios::trunc) << damaged;
    Outcome refused = start();
    CHECK(refused.exit_status == 1);
    CHECK_MESSAGE(refused.err.find("Corruption: catalog ") != std::string::npos, refused.err);
    CHECK_MESSAGE(refused.err.find("restore " + (server_dir / "catalog.db").string() + " from a backup") !=
                      std::string::npos,
                  refused.err);
  }
  std::ofstream(server_dir / "catalog.db", std::ios::binary | std::ios::trunc) << good;
  ServerProcess again(fmt::format("unix:{}", (dir / "s.sock").string()), server_dir);
  check_prints(dir, {"ls", "--bus", again.address()}, {"one"});
}

TEST_CASE("pagefile export: a failed read leaves the local file as it was and nothing beside it; one there is "
          "replaced only with --force") {
  // It returned at the first failed read with reads still in flight into
  // buffers it then freed, after truncating the local file it wrote over.
  TempDir dir;
  ServerProcess a(fmt::format("unix:{}", (dir / "a.sock").string()), dir / "a");
  const std::string b_listen = fmt::format("unix:{}", (dir / "b.sock").string());
  auto b = std::make_unique<ServerProcess>(b_listen, dir / "b");
  const std::string bus = a.address() + "," + b->address();
  make_database(dir / "app.db");
  REQUIRE(admin(dir, {"import", "app.db", "app", "--bus", bus}).exit_status == 0);
  // Damaged on b's disk behind its back: pages 1 and 2 (one of them is b's).
  b.reset();
  const auto shares = names_starting(dir / "b" / "shares", "");
  REQUIRE(shares.size() == 1);
  for (int64_t page : {1, 2}) damage_page(dir / "b" / "shares" / shares[0], page, 100);
  b = std::make_unique<ServerProcess>(b_listen, dir / "b");

  const std::string precious(100000, 'p');
  write_file(dir / "precious.txt", precious);
  Outcome refused = admin(dir, {"export", "app", "precious.txt", "--bus", bus});
  CHECK(refused.exit_status == 1);
  CHECK_MESSAGE(refused.err.find("AlreadyExists: precious.txt: exists; give --force to replace it") !=
                    std::string::npos,
                refused.err);
  // (A few times: the reads in flight at the failure differ from run to run.)
  for (int run = 0; run < 3; ++run) {
    CAPTURE(run);
    Outcome failed = admin(dir, {"export", "app", "precious.txt", "--force", "--bus", bus});
    CHECK(failed.exit_status == 1);  // (not a crash)
    CHECK_MESSAGE(failed.err.find("Corruption") != std::string::npos, failed.err);
    CHECK(read_file(dir / "precious.txt") == precious);
    CHECK(names_starting(dir.path(), ".precious.txt.export-").empty());
    Outcome fresh = admin(dir, {"export", "app", "fresh.db", "--bus", bus});
    CHECK(fresh.exit_status == 1);
    CHECK_FALSE(std::filesystem::exists(dir / "fresh.db"));
    CHECK(names_starting(dir.path(), ".fresh.db.export-").empty());
  }

  // A sound file replaces it with --force, whole.
  make_database(dir / "other.db");
  REQUIRE(admin(dir, {"import", "other.db", "other", "--bus", bus}).exit_status == 0);
  Outcome replaced = admin(dir, {"export", "other", "precious.txt", "--force", "--bus", bus});
  INFO(replaced.err);
  CHECK(replaced.exit_status == 0);
  CHECK(read_file(dir / "precious.txt") == read_file(dir / "other.db"));
  CHECK(names_starting(dir.path(), ".precious.txt.export-").empty());

  // What is not a regular file is never replaced, --force or not: a link
  // (and the file it leads to), a FIFO, a directory.
  std::filesystem::create_symlink(dir / "precious.txt", dir / "link.db");
  REQUIRE(::mkfifo((dir / "fifo.db").c_str(), 0600) == 0);
  std::filesystem::create_directory(dir / "dir.db");
  for (const char* target : {"link.db", "fifo.db", "dir.db"}) {
    CAPTURE(target);
    Outcome refused_kind = admin(dir, {"export", "other", target, "--force", "--bus", bus});
    CHECK(refused_kind.exit_status == 1);
    CHECK_MESSAGE(refused_kind.err.find("is not a regular file") != std::string::npos, refused_kind.err);
    CHECK(names_starting(dir.path(), fmt::format(".{}.export-", target)).empty());
  }
  CHECK(std::filesystem::is_symlink(dir / "link.db"));
  CHECK(std::filesystem::is_fifo(dir / "fifo.db"));
  CHECK(std::filesystem::is_directory(dir / "dir.db"));
  CHECK(read_file(dir / "precious.txt") == read_file(dir / "other.db"));
}

TEST_CASE("pagefile import copies an SQLite database as SQLite reads it: a WAL's commits in, a hot journal's "
          "uncommitted changes out") {
  // It copied the main file as it lay, under no lock: a commit still in the
  // WAL was lost, and pages a crashed transaction had written were kept.
  TempDir dir;
  ServerProcess a(fmt::format("unix:{}", (dir / "a.sock").string()), dir / "a");

  SUBCASE("a commit only in the WAL") {
    run_and_die(dir / "w.db",
                "PRAGMA page_size=4096; PRAGMA journal_mode=wal; PRAGMA wal_autocheckpoint=0;"
                "CREATE TABLE t(x); INSERT INTO t VALUES('base'); PRAGMA wal_checkpoint(TRUNCATE);"
                "INSERT INTO t VALUES('committed-in-wal');");
    REQUIRE(std::filesystem::file_size(dir / "w.db-wal") > 0);
    Outcome imported = admin(dir, {"import", "w.db", "w", "--bus", a.address()});
    INFO(imported.err);
    REQUIRE(imported.exit_status == 0);
    REQUIRE(admin(dir, {"export", "w", "copy.db", "--bus", a.address()}).exit_status == 0);
    // The commit was checkpointed into the file, and the copy is that file.
    CHECK(read_file(dir / "copy.db") == read_file(dir / "w.db"));
    CHECK(sqlite_rows(dir / "copy.db", "SELECT group_concat(x) FROM t") == "base,committed-in-wal\n");
  }

  SUBCASE("a hot journal") {
    // Rows of 'a' committed; then all of them made 'b' in a transaction
    // whose pages spill into the file (a cache of 10 pages) before it dies.
    run_and_die(dir / "h.db",
                "CREATE TABLE t(x);"
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<2000)"
                " INSERT INTO t SELECT printf('%.100c', 'a') FROM n;"
                "PRAGMA cache_size=10; BEGIN; UPDATE t SET x=printf('%.100c', 'b');");
    REQUIRE(std::filesystem::file_size(dir / "h.db-journal") > 0);
    // What SQLite reads (from a copy, so that this reading rolls back only
    // the copy's journal).
    std::filesystem::copy_file(dir / "h.db", dir / "seen.db");
    std::filesystem::copy_file(dir / "h.db-journal", dir / "seen.db-journal");
    const std::string query = "SELECT substr(x, 1, 1), count(*) FROM t GROUP BY 1";
    const std::string seen = sqlite_rows(dir / "seen.db", query);
    CHECK(seen == "a|2000\n");
    Outcome imported = admin(dir, {"import", "h.db", "h", "--bus", a.address()});
    INFO(imported.err);
    REQUIRE(imported.exit_status == 0);
    REQUIRE(admin(dir, {"export", "h", "copy.db", "--bus", a.address()}).exit_status == 0);
    CHECK(read_file(dir / "copy.db") == read_file(dir / "h.db"));  // rolled back, then copied
    CHECK(sqlite_rows(dir / "copy.db", query) == seen);
    CHECK(sqlite_rows(dir / "copy.db", "PRAGMA integrity_check") == "ok\n");
  }

  SUBCASE("a file named like a URI is the file of that name, not the one the URI names") {
    // "file:n.db" was given to SQLite as it was, which (built with
    // SQLITE_USE_URI) took it for the URI of n.db: the checkpoint went to
    // n.db, and the copy, of the file itself, lost the commit in its WAL.
    run_and_die(dir / "file:n.db",
                "PRAGMA page_size=4096; PRAGMA journal_mode=wal; PRAGMA wal_autocheckpoint=0;"
                "CREATE TABLE t(x); INSERT INTO t VALUES('base'); PRAGMA wal_checkpoint(TRUNCATE);"
                "INSERT INTO t VALUES('committed-in-wal');");
    run_and_die(dir / "n.db", "CREATE TABLE other(y);");
    Outcome imported = admin(dir, {"import", "file:n.db", "n", "--bus", a.address()});
    INFO(imported.err);
    REQUIRE(imported.exit_status == 0);
    REQUIRE(admin(dir, {"export", "n", "copy.db", "--bus", a.address()}).exit_status == 0);
    CHECK(sqlite_rows(dir / "copy.db", "SELECT group_concat(x) FROM t") == "base,committed-in-wal\n");
  }

  SUBCASE("a WAL that cannot be checkpointed (a reader on it) is refused, leaving no record") {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2((dir / "r.db").c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix") ==
            SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "PRAGMA journal_mode=wal; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(x);"
                         "INSERT INTO t VALUES(1); BEGIN; SELECT count(*) FROM t;",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    Outcome refused = admin(dir, {"import", "r.db", "r", "--bus", a.address()});
    CHECK(refused.exit_status == 1);
    CHECK_MESSAGE(refused.err.find("Busy: r.db: in WAL mode") != std::string::npos, refused.err);
    CHECK(admin(dir, {"stat", "r", "--bus", a.address()}).exit_status == 1);
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
}
