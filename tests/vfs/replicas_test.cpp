// SQLite on replicated databases (replicas=2) over three pagefiled: a page
// server killed (SIGKILL) in the middle of a stream of transactions fails
// none of them, and every row reads back, while it is dead and once it is
// back with its old pages (its copies are stale, never read); resynced, it
// stands for another server that dies. With the built-in catalog and with
// the catalog on etcd.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <atomic>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "tests/support/cluster.h"
#include "tests/support/etcd_cluster.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/sqlite_db.h"

using pagefile::test::Outcome;
using pagefile::test::PagefiledCluster;
using pagefile::test::SqliteDb;

namespace {

constexpr int kTransactions = 300;

// The rows `uri` holds, checked against what kTransactions commits wrote:
// the count, the sum of the ids, and the counter they all added one to.
void check_rows(const std::string& uri, int committed) {
  SqliteDb db(uri);
  REQUIRE(db.open_rc() == SQLITE_OK);
  db.run("PRAGMA locking_mode=EXCLUSIVE");  // (a remote WAL database needs it: doc/sqlite_vfs.md)
  std::string got = db.query("SELECT count(*), sum(id), (SELECT n FROM counter) FROM log");
  CHECK(db.last_query_rc() == SQLITE_OK);
  CHECK(got == fmt::format("{}|{}|{}", committed, committed * (committed + 1) / 2, committed));
  // Every body, whole: a page read from a copy that missed writes would
  // show as a wrong length or a failed integrity check.
  CHECK(db.query("SELECT count(*) FROM log WHERE length(body) = 600") == std::to_string(committed));
  CHECK(db.query("PRAGMA integrity_check") == "ok");
}

}  // namespace

TEST_CASE("replicas=2: a page server killed during a stream of SQLite transactions fails none of them") {
  pagefile::test::register_without_bus();
  // The same with the built-in catalog (the first server's) and with the
  // catalog on a 3-member etcd, which every server and this client use.
  std::unique_ptr<pagefile::test::EtcdCluster> etcd;
  std::vector<std::string> args = {"--cache-pages", "0"};
  SUBCASE("built-in catalog") {}
  SUBCASE("catalog on etcd") {
    etcd = std::make_unique<pagefile::test::EtcdCluster>(3);
    args.insert(args.end(), {"--catalog", etcd->catalog_flag()});
  }
  PagefiledCluster cluster(3, args);
  const std::string bus = etcd ? cluster.bus() + "," + etcd->bus_entries() : cluster.bus();
  for (std::string mode : {"delete", "wal"}) {
    CAPTURE(mode);
    const std::string uri = fmt::format("file:stream-{}.db?vfs=pagefile&replicas=2&timeout_ms=5000&bus={}", mode, bus);
    std::atomic<int> committed{0};
    std::thread killer;
    {
      SqliteDb db(uri);
      REQUIRE(db.open_rc() == SQLITE_OK);
      // WAL on a remote database wants this connection to keep the lock.
      if (mode == "wal") db.run("PRAGMA locking_mode=EXCLUSIVE");
      db.run(fmt::format("PRAGMA journal_mode={}", mode));
      db.run("CREATE TABLE log(id INTEGER PRIMARY KEY, body TEXT); CREATE TABLE counter(n); "
             "INSERT INTO counter VALUES (0);");
      // Killed once a third of the transactions are in, while the next run.
      killer = std::thread([&] {
        for (int i = 0; i < 2000 && committed.load() < kTransactions / 3; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        cluster.server(2).kill();
      });
      int failed_rc = SQLITE_OK;
      std::string failed;
      for (int i = 1; i <= kTransactions && failed_rc == SQLITE_OK; ++i) {
        failed_rc = db.exec(fmt::format("BEGIN; INSERT INTO log VALUES ({}, printf('%.600c', 'x')); "
                                        "UPDATE counter SET n = n + 1; COMMIT;", i));
        if (failed_rc == SQLITE_OK) {
          committed = i;
        } else {
          failed = fmt::format("transaction {}: {} ({})", i, db.last_error(), db.query("PRAGMA pagefile_last_error"));
        }
      }
      committed = kTransactions;  // (the killer waits no longer)
      killer.join();
      INFO(failed);
      REQUIRE(failed_rc == SQLITE_OK);
      // (Read by this connection: in WAL mode it holds the lock.)
      CHECK(db.query("SELECT count(*), (SELECT n FROM counter) FROM log") ==
            fmt::format("{}|{}", kTransactions, kTransactions));
    }
    check_rows(uri, kTransactions);
    Outcome stat = pagefile::test::pagefile_admin(cluster.dir().path(),
                                                  {"stat", fmt::format("stream-{}.db", mode), "--bus", bus});
    INFO(stat.out, stat.err);
    CHECK(stat.out.find("DEGRADED: stale on " + cluster.server(2).address()) != std::string::npos);
    // Back with the pages it had: never read.
    cluster.start_again(2);
    check_rows(uri, kTransactions);
    // Brought up to date, it may stand for another: server 1 dies, and
    // every row written while server 2 was dead is still there.
    Outcome resync = pagefile::test::pagefile_admin(cluster.dir().path(), {"resync", "--bus", bus});
    INFO(resync.out, resync.err);
    CHECK(resync.exit_status == 0);
    cluster.server(1).kill();
    check_rows(uri, kTransactions);
    cluster.start_again(1);
    // (Its copies missed nothing: no write came while it was down.)
  }
}
