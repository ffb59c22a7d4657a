// The catalog on etcd with real processes: a 3-member etcd on loopback,
// three pagefiled started with --catalog etcd://..., clients whose bus names
// the members (catalog=etcd://...) and clients whose bus names only the
// servers. SQLite commits go on while etcd's leader dies, fail cleanly while
// etcd has no quorum, and go on again, in the same connection, once it has.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "server/etcd_catalog.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/eventually.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/sqlite_db.h"

using namespace std::chrono_literals;
using pagefile::test::EtcdCluster;
using pagefile::test::PagefiledCluster;
using pagefile::test::SqliteDb;

namespace {

constexpr uint32_t kPageSize = 4096;

std::vector<std::string> live_servers(const EtcdCluster& etcd) {
  pagefile::net::EtcdCatalog::Options options;
  options.endpoints = etcd.endpoints();
  auto catalog = pagefile::net::EtcdCatalog::open(options);
  REQUIRE(catalog);
  auto live = (*catalog)->live_servers();
  REQUIRE(live);
  return *live;
}

std::vector<std::string> split(const std::string& bus) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= bus.size()) {
    size_t comma = bus.find(',', at);
    if (comma == std::string::npos) comma = bus.size();
    out.push_back(bus.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("catalog on etcd: any server answers it, clients keep their own front, dead servers drop out") {
  EtcdCluster etcd(3);
  PagefiledCluster cluster(3, {"--catalog", etcd.catalog_flag(), "--lease-ms", "2000"});
  const std::vector<std::string> servers = split(cluster.bus());

  // Every server registers itself as live.
  std::vector<std::string> expected = servers;
  std::sort(expected.begin(), expected.end());
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (live_servers(etcd) != expected && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100ms);
  CHECK(live_servers(etcd) == expected);

  pagefile::OpenOptions options;
  options.location = pagefile::Location::kRemote;
  options.page_size = kPageSize;
  options.create = true;
  options.replicas = 2;
  {
    // A client of the catalog on etcd itself.
    auto client = pagefile::test::start_client(cluster.dir().path() / "a", cluster.bus() + "," + etcd.bus_entries());
    auto fd = client->open("shared.db", options);
    REQUIRE_MESSAGE(fd, fd.status().to_string());
    pagefile::test::write_patterns(*client, *fd, 64, kPageSize, 7);
    REQUIRE(client->close(*fd));
  }
  for (size_t catalog : {size_t{1}, size_t{2}}) {
    // Clients whose bus names only the servers: the one they take for the
    // catalog answers from etcd, whichever it is.
    CAPTURE(catalog);
    std::string bus = servers[0] + "," + servers[1] + "," + servers[2];
    bus.replace(bus.find(servers[catalog]), servers[catalog].size(), "catalog=" + servers[catalog]);
    auto client = pagefile::test::start_client(cluster.dir().path() / fmt::format("b{}", catalog), bus);
    auto fd = client->open("shared.db", options);
    REQUIRE_MESSAGE(fd, fd.status().to_string());
    CHECK(pagefile::test::wrong_patterns(*client, *fd, 64, kPageSize, 7) == 0);
    REQUIRE(client->close(*fd));
  }

  // A frozen server (SIGSTOP: it neither answers nor closes) stops renewing
  // its registration: a client of the catalog on etcd sees it gone within
  // about one lease and reads the other copies, none waiting out its
  // request timeout (60 s here) on the frozen one.
  {
    auto client = pagefile::test::start_client(cluster.dir().path() / "c", cluster.bus() + "," + etcd.bus_entries());
    REQUIRE(client->set_request_timeout(60'000));
    auto fd = client->open("shared.db", options);
    REQUIRE(fd);
    REQUIRE(::kill(cluster.server(1).pid(), SIGSTOP) == 0);
    (void)pagefile::test::eventually(
        [&] {
          auto live = live_servers(etcd);
          return std::find(live.begin(), live.end(), servers[1]) == live.end();
        },
        10s, 50ms);
    std::this_thread::sleep_for(3s);  // the client asks twice a second (and may be late on a loaded machine)
    auto start = std::chrono::steady_clock::now();
    CHECK(pagefile::test::wrong_patterns(*client, *fd, 64, kPageSize, 7) == 0);
    auto took = std::chrono::steady_clock::now() - start;
    MESSAGE("64 reads with a copy's server frozen took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                                                          << " ms");
    CHECK(took < 30s);
    REQUIRE(::kill(cluster.server(1).pid(), SIGCONT) == 0);
    REQUIRE(client->close(*fd));
  }

  // A server that dies drops out of the live list within one lease (2 s)
  // and the time etcd takes to notice a lease ran out. (Bounded at 10 s:
  // on a loaded machine etcd may hold an election meanwhile, which gives
  // every lease its full time again.)
  cluster.server(2).kill();
  auto killed = std::chrono::steady_clock::now();
  expected.erase(std::find(expected.begin(), expected.end(), servers[2]));
  (void)pagefile::test::eventually([&] { return live_servers(etcd) == expected; }, 10s, 50ms);
  auto gone_after = std::chrono::steady_clock::now() - killed;
  CHECK(live_servers(etcd) == expected);
  MESSAGE("a killed server left the live list after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(gone_after).count() << " ms");
  CHECK(gone_after < 10s);
}

TEST_CASE("catalog on etcd: SQLite commits through the leader's death and a lost quorum") {
  pagefile::test::register_without_bus();
  EtcdCluster etcd(3);
  PagefiledCluster cluster(3, {"--catalog", etcd.catalog_flag(), "--cache-pages", "0"});
  const std::string uri = fmt::format("file:etcd-stream.db?vfs=pagefile&replicas=2&timeout_ms=5000&bus={},{}",
                                      cluster.bus(), etcd.bus_entries());
  SqliteDb db(uri);
  REQUIRE(db.open_rc() == SQLITE_OK);
  db.run("PRAGMA journal_mode=delete");
  db.run("CREATE TABLE log(id INTEGER PRIMARY KEY, body TEXT); CREATE TABLE counter(n); INSERT INTO counter VALUES (0);");

  int committed = 0;
  auto commit = [&](int i) {
    return db.exec(fmt::format("BEGIN; INSERT INTO log VALUES ({}, printf('%.600c', 'x')); "
                               "UPDATE counter SET n = n + 1; COMMIT;", i));
  };
  auto check_rows = [&] {
    std::string got = db.query("SELECT count(*), sum(id), (SELECT n FROM counter) FROM log");
    CHECK(got == fmt::format("{}|{}|{}", committed, committed * (committed + 1) / 2, committed));
    CHECK(db.query("PRAGMA integrity_check") == "ok");
  };

  // The leader dies a third of the way in: every commit completes (or fails
  // whole, and is not counted: the rows say which).
  constexpr int kTransactions = 120;
  auto slowest = std::chrono::steady_clock::duration::zero();
  int failures = 0;
  for (int i = 1; i <= kTransactions; ++i) {
    if (i == kTransactions / 3) etcd.kill(etcd.leader());
    auto start = std::chrono::steady_clock::now();
    int rc = commit(committed + 1);
    slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
    if (rc == SQLITE_OK) {
      ++committed;
    } else {
      ++failures;
      MESSAGE("transaction " << i << ": " << db.last_error());
      db.exec("ROLLBACK");
    }
  }
  MESSAGE("etcd's leader killed: " << committed << " of " << kTransactions << " commits, the slowest "
                                   << std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count() << " ms");
  CHECK(failures == 0);
  check_rows();

  // No quorum: a commit fails with a clean error within its deadline.
  size_t second = etcd.leader();
  etcd.kill(second);
  auto start = std::chrono::steady_clock::now();
  int rc = commit(committed + 1);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(rc != SQLITE_OK);
  MESSAGE("without quorum: " << db.last_error() << " after "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < 30s);
  db.exec("ROLLBACK");

  // Quorum back: the same connection commits again.
  etcd.start_again(second);
  REQUIRE(etcd.wait_writable(20s));
  int again = SQLITE_ERROR;
  for (int tries = 0; tries < 20 && again != SQLITE_OK; ++tries) {
    again = commit(committed + 1);
    if (again != SQLITE_OK) {
      db.exec("ROLLBACK");
      std::this_thread::sleep_for(250ms);
    }
  }
  REQUIRE_MESSAGE(again == SQLITE_OK, db.last_error());
  ++committed;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(commit(committed + 1) == SQLITE_OK);
    ++committed;
  }
  check_rows();
}
