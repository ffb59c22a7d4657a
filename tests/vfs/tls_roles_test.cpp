// A tls:// cluster of pagefiled processes end to end: SQLite through the
// VFS and the admin CLI, each proving itself with a key file (pagefile
// keygen) whose role bounds what it may do; a reader's database is
// read-only (SQLITE_READONLY), a reader or writer cannot remove or import,
// and a wrong key, no key or plain tcp is refused while the servers go on
// serving everyone else.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <string>

#include "tests/support/cluster.h"
#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/sqlite_db.h"

using namespace pagefile::test;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// `pagefile ARGS --bus BUS` in dir/run-<n>, so runs never share output files.
Outcome admin(const TempDir& dir, std::vector<std::string> args, const std::string& bus) {
  static int run = 0;
  const auto where = dir / ("run-" + std::to_string(++run));
  std::filesystem::create_directories(where);
  args.insert(args.end(), {"--bus", bus});
  return pagefile_admin(where, args);
}

struct Keys {
  explicit Keys(const TempDir& dir) {
    for (const char* role : {"admin", "writer", "reader", "stranger"}) {
      Outcome made = pagefile_admin(
          dir.path(), {"keygen", "--role", std::string(role) == "stranger" ? "admin" : role, path(dir, role)});
      INFO(made.err);
      REQUIRE(made.exit_status == 0);
    }
  }
  static std::string path(const TempDir& dir, const std::string& role) { return (dir / (role + ".key")).string(); }
};

}  // namespace

TEST_CASE("tls:// cluster: each key's role bounds what its holder may do; SQLite opens read-only for a reader") {
  register_without_bus();
  TempDir keys_dir;
  Keys keys(keys_dir);
  auto key = [&](const std::string& role) { return Keys::path(keys_dir, role); };
  PagefiledCluster cluster(2, {"--psk-file", key("admin"), "--psk-file", key("writer"), "--psk-file", key("reader")},
                           Listen::kTls);
  const std::string bus = cluster.bus();
  auto bus_as = [&](const std::string& role) { return bus + ",psk_file=" + key(role); };
  TempDir dir;

  // A writer makes a database.
  run_on("file:app.db?vfs=pagefile&bus=" + bus_as("writer"), "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3)");
  // A reader reads it, and cannot change it.
  {
    SqliteDb db("file:app.db?vfs=pagefile&bus=" + bus_as("reader"));
    REQUIRE(db.open_rc() == SQLITE_OK);
    CHECK(db.query("SELECT sum(x) FROM t") == "6");
    CHECK(db.exec("INSERT INTO t VALUES (4)") == SQLITE_READONLY);
    CHECK(sqlite3_db_readonly(db.get(), "main") == 1);
    CHECK(db.query("SELECT sum(x) FROM t") == "6");
  }
  // Nor may it make a database.
  {
    SqliteDb db("file:new.db?vfs=pagefile&bus=" + bus_as("reader"));
    CHECK(db.open_rc() != SQLITE_OK);
  }

  // The admin CLI: a reader lists, but neither removes nor imports; a
  // writer imports but does not remove; an admin removes.
  Outcome ls = admin(dir, {"ls", "--psk-file", key("reader")}, bus);
  INFO(ls.out, ls.err);
  CHECK(ls.exit_status == 0);
  CHECK(has(ls.out, "app.db"));
  Outcome rm = admin(dir, {"rm", "app.db", "--psk-file", key("reader")}, bus);
  CHECK(rm.exit_status == 1);
  CHECK(has(rm.err, "PermissionDenied"));
  CHECK(has(rm.err, "role reader"));
  write_file(dir / "local.bin", std::string(3 * 4096, 'x'));
  Outcome import = admin(dir, {"import", (dir / "local.bin").string(), "copy.bin", "--psk-file", key("reader")}, bus);
  CHECK(import.exit_status == 1);
  CHECK(has(import.err, "role reader"));
  import = admin(dir, {"import", (dir / "local.bin").string(), "copy.bin", "--psk-file", key("writer")}, bus);
  CHECK(import.exit_status == 0);
  rm = admin(dir, {"rm", "app.db", "--psk-file", key("writer")}, bus);
  CHECK(rm.exit_status == 1);
  CHECK(has(rm.err, "needs admin"));
  rm = admin(dir, {"rm", "app.db", "--psk-file", key("admin")}, bus);
  CHECK(rm.exit_status == 0);

  // A key the servers do not hold, no key, plain tcp: refused, clearly.
  Outcome stranger = admin(dir, {"ls", "--psk-file", key("stranger")}, bus);
  CHECK(stranger.exit_status == 1);
  CHECK(has(stranger.err, "TLS handshake refused"));
  Outcome no_key = admin(dir, {"ls"}, bus);
  CHECK(no_key.exit_status == 1);
  CHECK(has(no_key.err, "psk_file"));
  std::string plain = bus;
  for (size_t at; (at = plain.find("tls://")) != std::string::npos;) plain.replace(at, 6, "tcp://");
  Outcome tcp = admin(dir, {"ls"}, plain);
  CHECK(tcp.exit_status == 1);

  // ...and the servers serve the others all along.
  ls = admin(dir, {"ls", "--psk-file", key("admin")}, bus);
  CHECK(ls.exit_status == 0);
  CHECK(has(ls.out, "copy.bin"));
  CHECK_FALSE(has(ls.out, "app.db"));
}
