// Replicated remote files (OpenOptions::replicas) on real pagefiled
// processes: where the copies go, reads that go on when a server is dead,
// frozen or holds a damaged copy, repairs, writes that go on while one copy
// of each page can take them (the others marked stale, never read again),
// and the counts the catalog refuses.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "bus/bus_client.h"
#include "bus/bus_config.h"
#include "bus/placement.h"
#include "bus/remote_page_io.h"
#include "pagefile/pagefile.h"
#include "store/local_pagefile.h"
#include "tests/support/cluster.h"
#include "tests/support/page_file.h"
#include "tests/tools/run_program.h"

using namespace pagefile;
using namespace pagefile::test;
using pagefile::test::Outcome;

namespace {

constexpr uint32_t kPageSize = 4096;

OpenOptions replicated(uint32_t replicas, Placement placement = Placement::kStripe) {
  return {.location = Location::kRemote,
          .page_size = kPageSize,
          .create = true,
          .placement = placement,
          .replicas = replicas};
}

void write_all(Client& client, Fd fd, int64_t pages, uint64_t seed) {
  write_patterns(client, fd, pages, kPageSize, seed);
}
int wrong_pages(Client& client, Fd fd, int64_t pages, uint64_t seed) {
  return wrong_patterns(client, fd, pages, kPageSize, seed);
}

// Creates `name` with replicas=2 through `client` and writes its `pages`
// pages (write_all with `seed`): its Fd.
Fd replicated_file(Client& client, const std::string& name, int64_t pages, uint64_t seed) {
  auto fd = client.open(name, replicated(2));
  REQUIRE_OK(fd);
  write_all(client, *fd, pages, seed);
  return *fd;
}

// Server i's share of file `id` in a PagefiledCluster.
std::filesystem::path share_path(const PagefiledCluster& cluster, size_t i, uint64_t id) {
  return cluster.dir() / fmt::format("s{}", i) / "shares" / fmt::format("{}.pf", id);
}

// Pages of the share at `path` that read back sound, and of those, which
// hold the pattern of `seed` (the others never came to this server: zeros).
struct ShareContent {
  std::vector<int64_t> holding;
  int damaged = 0;
};
ShareContent share_content(const std::filesystem::path& path, int64_t pages, uint64_t seed) {
  LocalPagefile::OpenSpec spec;
  spec.read_only = true;
  auto file = LocalPagefile::open(path, spec);
  REQUIRE_OK(file);
  ShareContent out;
  std::vector<std::byte> buf(kPageSize);
  for (int64_t p = 0; p < pages; ++p) {
    Status s = (*file)->verify_page(p, buf);
    if (!s) {
      CHECK_CODE(s, Code::kCorruption);
      ++out.damaged;
    } else if (buf == page_pattern(kPageSize, p, seed)) {
      out.holding.push_back(p);
    } else {
      CHECK(buf == std::vector<std::byte>(kPageSize));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("replicas=2 over 3 servers: each page on the two its placement names, read on with one killed") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 90;
  for (Placement placement : {Placement::kStripe, Placement::kHash}) {
    CAPTURE(placement_name(placement));
    const std::string name = fmt::format("r2-{}", placement_name(placement));
    {
      auto client = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
      auto fd = client->open(name, replicated(2, placement));
      REQUIRE_OK(fd);
      CHECK(client->status(*fd)->replicas == 2);
      write_all(*client, *fd, kPages, 5);
      CHECK(wrong_pages(*client, *fd, kPages, 5) == 0);
    }
    // On disk: server i holds exactly the pages whose copies the placement
    // puts on it (ids: the catalog's, from 1, in order of creation).
    uint64_t id = placement == Placement::kStripe ? 1 : 2;
    std::vector<std::string> addresses;
    for (size_t i = 0; i < cluster.size(); ++i) addresses.push_back(cluster.server(i).address());
    net::PagePlacement where(placement, id, 1, addresses, 2);
    for (size_t i = 0; i < cluster.size(); ++i) {
      CAPTURE(i);
      std::vector<int64_t> want;
      for (int64_t p = 0; p < kPages; ++p) {
        auto set = where.replicas_for(p);
        if (set.index[0] == i || set.index[1] == i) want.push_back(p);
      }
      ShareContent got = share_content(share_path(cluster, i, id), kPages, 5);
      CHECK(got.damaged == 0);
      CHECK(got.holding == want);
    }
  }
  // Server 2 dies (server 0, the catalog, lives): every page still reads,
  // from the copy that is left, in a client started before and one after.
  auto before = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
  auto fd = before->open("r2-stripe", {.location = Location::kRemote});
  REQUIRE_OK(fd);
  cluster.server(2).kill();
  CHECK(wrong_pages(*before, *fd, kPages, 5) == 0);
  auto after = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
  auto hashed = after->open("r2-hash", {.location = Location::kRemote});
  REQUIRE_OK(hashed);
  CHECK(wrong_pages(*after, *hashed, kPages, 5) == 0);
  // With one copy only, the pages server 2 held are gone: a clear error.
  auto single = after->open("single", replicated(1));
  REQUIRE_OK(single);
  CHECK_CODE(after->write(*single, 2, page_pattern(kPageSize, 2, 1)), Code::kDisconnected);
  cluster.start_again(2);
}

TEST_CASE("replicas=2: a frozen server's reads time out and go to the other copy") {
  PagefiledCluster cluster(2, {"--cache-pages", "0"});
  constexpr int64_t kPages = 24;
  // (A deadline short enough to wait out, long enough that the live
  // server's answers, and the writes before the freeze, meet it on a
  // loaded machine.)
  auto client = cluster.client({.concurrency = 8, .request_timeout_ms = 2500});
  const Fd fd = replicated_file(*client, "frozen", kPages, 9);
  // Server 1 stops answering (SIGSTOP): its reads wait out their deadline,
  // then the copy on server 0 answers; nothing fails, nothing hangs.
  REQUIRE(::kill(cluster.server(1).pid(), SIGSTOP) == 0);
  auto start = std::chrono::steady_clock::now();
  int wrong = wrong_pages(*client, fd, kPages, 9);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(::kill(cluster.server(1).pid(), SIGCONT) == 0);
  CHECK(wrong == 0);
  // Bounded by the deadline (once: the silent server then fails at once).
  CHECK(took < std::chrono::seconds(10));
}

TEST_CASE("replicas=2: a copy that fails its checksum is read from the other and repaired") {
  PagefiledCluster cluster(2, {"--cache-pages", "0"});
  constexpr int64_t kPages = 20;
  {
    auto client = cluster.client();
    replicated_file(*client, "damaged", kPages, 3);
  }
  // Every page on server 1 damaged, as a failing disk would.
  for (int64_t p = 0; p < kPages; ++p) damage_page(share_path(cluster, 1, 1), p, 100 + static_cast<uint32_t>(p));
  CHECK(share_content(share_path(cluster, 1, 1), kPages, 3).damaged == kPages);

  auto client = cluster.client();
  auto fd = client->open("damaged", {.location = Location::kRemote});
  REQUIRE_OK(fd);
  // Every page reads right: from server 0 first, or from server 0 after
  // server 1's copy failed.
  CHECK(wrong_pages(*client, *fd, kPages, 3) == 0);
  // The copies that were tried and failed are now repaired; the others
  // (read from server 0 first) are still damaged. Which ones is fixed by
  // the page: some of each among 20.
  REQUIRE_OK(client->close(*fd));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ShareContent repaired;
  // (A repair is answered to no one: wait for it to land.)
  for (;;) {
    repaired = share_content(share_path(cluster, 1, 1), kPages, 3);
    if (!repaired.holding.empty() || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(repaired.holding.size() > 0);
  CHECK(repaired.damaged > 0);
  CHECK(repaired.damaged + static_cast<int>(repaired.holding.size()) == kPages);

  // Both copies of a page damaged: kCorruption, naming the page; never
  // other bytes.
  damage_page(share_path(cluster, 0, 1), 7, 50);
  damage_page(share_path(cluster, 1, 1), 7, 60);
  auto again = client->open("damaged", {.location = Location::kRemote});
  REQUIRE_OK(again);
  std::vector<std::byte> buf(kPageSize);
  auto r = client->read(*again, 7, buf);
  CHECK_CODE(r, Code::kCorruption);
  CHECK(r.status().message().find("page 7") != std::string::npos);
  CHECK(r.status().message().find("no copy of 7 could be read") != std::string::npos);
}

TEST_CASE("replica counts: recorded at creation, refused when they cannot be met or do not match") {
  PagefiledCluster cluster(2);
  auto client = cluster.client();
  auto three = client->open("three", replicated(3));
  CHECK_CODE(three, Code::kInvalidArgument);
  CHECK(three.status().message().find("needs 3 servers") != std::string::npos);
  CHECK_CODE(client->open("eight", replicated(8)), Code::kInvalidArgument);
  // Nothing was created by the refusals.
  CHECK_CODE(client->open("three", {.location = Location::kRemote}), Code::kNotFound);

  auto two = client->open("two", replicated(2));
  REQUIRE_OK(two);
  auto same = client->open("two", {.location = Location::kRemote});  // 0: as recorded
  REQUIRE_OK(same);
  CHECK(client->status(*same)->replicas == 2);
  auto other = client->open("two", {.location = Location::kRemote, .replicas = 1});
  CHECK_CODE(other, Code::kInvalidArgument);
  CHECK(other.status().message().find("keeps 2 copies") != std::string::npos);

  // The bus's default applies to files created without a count of their own.
  auto defaulted = start_client(cluster.dir().path(), cluster.bus() + ",replicas=2");
  auto made = defaulted->open("made", {.location = Location::kRemote, .create = true});
  REQUIRE_OK(made);
  CHECK(defaulted->status(*made)->replicas == 2);
  auto one = defaulted->open("one", replicated(1));
  REQUIRE_OK(one);
  CHECK(defaulted->status(*one)->replicas == 1);
}

TEST_CASE("replicas=2: writes go on with a server killed; its copies are stale, never read, even once it is back") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 60;
  auto writer = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
  const Fd fd = replicated_file(*writer, "degraded", kPages, 1);
  // Another client that opened the file while every copy was current.
  auto other = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
  auto other_fd = other->open("degraded", {.location = Location::kRemote});
  REQUIRE_OK(other_fd);

  const std::string dead = cluster.server(2).address();
  cluster.server(2).kill();
  // Every write is confirmed: its other copy took it, and the catalog
  // marked server 2's copies stale.
  write_all(*writer, fd, kPages, 2);
  CHECK(wrong_pages(*writer, fd, kPages, 2) == 0);
  Outcome stat = pagefile_admin(cluster.dir().path(), {"stat", "degraded", "--bus", cluster.bus()});
  INFO(stat.out, stat.err);
  CHECK(stat.out.find("DEGRADED: stale on " + dead) != std::string::npos);
  Outcome status = pagefile_admin(cluster.dir().path(), {"status", "--bus", cluster.bus()});
  CHECK(status.out.find("DEGRADED degraded: stale on " + dead) != std::string::npos);

  // Back, with the pages of seed 1: never read. About half the pages with
  // a copy there would go to it if it were current.
  cluster.start_again(2);
  CHECK(wrong_pages(*writer, fd, kPages, 2) == 0);
  // The other client learns of it from its next lock's grant.
  REQUIRE_OK(other->lock(*other_fd, LockMode::kShared, LockWait::kBlock));
  CHECK(wrong_pages(*other, *other_fd, kPages, 2) == 0);
  REQUIRE_OK(other->unlock(*other_fd));
  // A client that opens it now reads the record's states.
  auto late = cluster.client();
  auto late_fd = late->open("degraded", {.location = Location::kRemote});
  REQUIRE_OK(late_fd);
  CHECK(wrong_pages(*late, *late_fd, kPages, 2) == 0);
  // Writes skip the stale copies (nothing fails while server 2 is up or down).
  write_all(*writer, fd, kPages, 3);
  CHECK(wrong_pages(*late, *late_fd, kPages, 3) == 0);

  // Server 1 dies too: a page with copies on 1 and 2 has no current copy
  // left to write; the write fails, clearly, and a read of it too. Pages
  // whose current copy lives on server 0 alone... do not exist: every page
  // has one copy on server 1 or 2 besides server 0's, so server 1's pages
  // cannot be left behind either (the catalog keeps one current copy).
  cluster.server(1).kill();
  auto refused = writer->write(fd, 1, page_pattern(kPageSize, 1, 4));  // copies on servers 1 and 2
  CHECK_CODE(refused, Code::kDisconnected);
  std::vector<std::byte> buf(kPageSize);
  CHECK_CODE(writer->read(fd, 1, buf), Code::kDisconnected);
  // Page 0 (servers 0 and 1): its copy on server 0 is current and answers.
  auto page0 = writer->read(fd, 0, buf);
  REQUIRE_OK(page0);
  CHECK(buf == page_pattern(kPageSize, 0, 3));
  cluster.start_again(1);
}

TEST_CASE("resync: a server back from the dead gets what it missed, while a writer goes on; then another may die") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 1500;
  auto client = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
  const Fd fd = replicated_file(*client, "resynced", kPages, 1);
  std::vector<uint64_t> seed_of(kPages, 1);  // what each page holds now

  cluster.server(2).kill();
  // Pages 0..299 change while server 2 is away: its copies of them go stale.
  for (int64_t p = 0; p < 300; ++p) {
    REQUIRE_OK(client->write(fd, p, page_pattern(kPageSize, p, 2)));
    seed_of[static_cast<size_t>(p)] = 2;
  }
  REQUIRE_OK(client->sync(fd));
  cluster.start_again(2);
  const std::string back = cluster.server(2).address();

  // A writer goes on under the file's write lock (as SQLite does) while
  // resync runs: each round rewrites a few pages spread over the file.
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  Status writer_status;
  std::vector<uint64_t> written = seed_of;
  std::thread writer([&] {
    auto own = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
    auto wfd = own->open("resynced", {.location = Location::kRemote});
    if (!wfd) {
      writer_status = wfd.status();
      return;
    }
    for (uint64_t round = 10; !stop.load() && round < 10 + 2000; ++round) {
      if (Status s = own->lock(*wfd, LockMode::kExclusive, LockWait::kBlock); !s) {
        writer_status = s;
        return;
      }
      for (int64_t p = static_cast<int64_t>(round * 7) % 50; p < kPages; p += 97) {
        if (Status s = own->write(*wfd, p, page_pattern(kPageSize, p, round)); !s) {
          writer_status = s;
          return;
        }
        written[static_cast<size_t>(p)] = round;
      }
      if (Status s = own->sync(*wfd); !s) {
        writer_status = s;
        return;
      }
      (void)own->unlock(*wfd);
      ++rounds;
    }
  });
  Outcome resync = pagefile_admin(cluster.dir().path(), {"resync", "--bus", cluster.bus()});
  stop = true;
  writer.join();
  INFO(resync.out, resync.err);
  CHECK(resync.exit_status == 0);
  CHECK_OK(writer_status);
  CHECK(rounds.load() > 0);
  CHECK(resync.out.find("resynced: " + back + " is up to date") != std::string::npos);
  CHECK(resync.out.find("every copy is current, or goes with its file") != std::string::npos);
  Outcome stat = pagefile_admin(cluster.dir().path(), {"stat", "resynced", "--bus", cluster.bus()});
  CHECK(stat.out.find("DEGRADED") == std::string::npos);

  // Another server dies: every page is read from its copies on the other
  // two, server 2's among them, and holds what was last written to it.
  cluster.server(1).kill();
  auto reader = cluster.client({.concurrency = 12, .request_timeout_ms = 10'000});
  auto rfd = reader->open("resynced", {.location = Location::kRemote});
  REQUIRE_OK(rfd);
  int wrong = 0;
  std::vector<std::byte> buf(kPageSize);
  for (int64_t p = 0; p < kPages; ++p) {
    auto r = reader->read(*rfd, p, buf);
    REQUIRE_OK(r);
    if (buf != page_pattern(kPageSize, p, written[static_cast<size_t>(p)])) ++wrong;
  }
  CHECK(wrong == 0);
  cluster.start_again(1);
}

namespace {

// A resync of server `server` of `name` with its own bus client, running
// `between` once, between two batches, after it has passed `after` pages.
Result<net::RemotePageIo::ResyncReport> resync_with(PagefiledCluster& cluster, const std::string& name,
                                                    size_t server, int64_t after, const std::function<void()>& between) {
  auto config = net::resolve_bus(cluster.bus());
  REQUIRE_OK(config);
  auto bus = net::BusClient::start(*config);
  REQUIRE_OK(bus);
  auto io = net::RemotePageIo::open(std::shared_ptr<net::BusClient>(std::move(*bus)), name,
                                    {.location = Location::kRemote});
  REQUIRE_OK(io);
  bool ran = false;
  // (A copy: `between` may start the server again, a new ServerProcess.)
  const std::string address = cluster.server(server).address();
  return (*io)->resync(address, [&](int64_t done, int64_t) {
    if (ran || done < after || !between) return;
    ran = true;
    between();
  });
}

// Page 301 of a replicas=2 file over three servers (stripe placement) has
// its copies on servers 1 and 2: read with server 1 killed, it is server
// 2's copy that answers.
constexpr int64_t kOnOneAndTwo = 301;

// Page `page` of `name` written with `seed` by a new client of `cluster`
// under the write lock, and synced.
void locked_write(PagefiledCluster& cluster, const std::string& name, int64_t page, uint64_t seed) {
  auto writer = cluster.client();
  auto fd = writer->open(name, {.location = Location::kRemote});
  REQUIRE_OK(fd);
  REQUIRE_OK(writer->lock(*fd, LockMode::kExclusive, LockWait::kBlock));
  REQUIRE_OK(writer->write(*fd, page, page_pattern(kPageSize, page, seed)));
  REQUIRE_OK(writer->sync(*fd));
  REQUIRE_OK(writer->unlock(*fd));
}

// Whether server 2's copy of page kOnOneAndTwo of `name` holds `seed`'s
// pattern: read with server 1 killed (started again after).
bool server_two_holds(PagefiledCluster& cluster, const std::string& name, uint64_t seed) {
  cluster.server(1).kill();
  auto reader = cluster.client();
  auto fd = reader->open(name, {.location = Location::kRemote});
  REQUIRE_OK(fd);
  std::vector<std::byte> buf(kPageSize);
  REQUIRE_OK(reader->read(*fd, kOnOneAndTwo, buf));
  cluster.start_again(1);
  return buf == page_pattern(kPageSize, kOnOneAndTwo, seed);
}

}  // namespace

TEST_CASE("resync: a copy left behind again while a resync ran is not made current by it, even once another "
          "resync has begun") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 1500;
  auto client = cluster.client();
  const Fd fd = replicated_file(*client, "x", kPages, 1);
  cluster.server(2).kill();
  write_all(*client, fd, kPages, 2);  // server 2's copies all stale
  REQUIRE_OK(client->sync(fd));
  cluster.start_again(2);

  // Resync A, past the page: server 2 misses a write of it (left behind
  // again), and resync B takes it up and waits after its first batch.
  std::atomic<int> stage{0};  // 1: B's first batch done; 2: A has ended
  std::thread b;
  Status b_result;
  auto a_result = resync_with(cluster, "x", 2, 512, [&] {
    cluster.server(2).kill();
    locked_write(cluster, "x", kOnOneAndTwo, 9);
    cluster.start_again(2);
    b = std::thread([&] {
      b_result = resync_with(cluster, "x", 2, 0, [&] {
                   stage = 1;
                   for (int i = 0; i < 600 && stage.load() != 2; ++i) {
                     std::this_thread::sleep_for(std::chrono::milliseconds(50));
                   }
                 }).status();
    });
    for (int i = 0; i < 600 && stage.load() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  stage = 2;
  b.join();
  // A ends refused; B, which began after the write, brings server 2 up to date.
  CHECK_CODE(a_result.status(), Code::kStale);
  CHECK_OK(b_result);
  Outcome stat = pagefile_admin(cluster.dir().path(), {"stat", "x", "--bus", cluster.bus()});
  CHECK(stat.out.find("DEGRADED") == std::string::npos);
  CHECK(server_two_holds(cluster, "x", 9));
}

TEST_CASE("resync: a writer fenced off while the copy was stale gets nothing onto it during the resync") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 1000;
  // The writer to be fenced off: it held the write lock once (its token).
  auto old_writer = cluster.client();
  const Fd old_fd = replicated_file(*old_writer, "z", kPages, 1);
  REQUIRE_OK(old_writer->lock(old_fd, LockMode::kExclusive, LockWait::kBlock));
  REQUIRE_OK(old_writer->write(old_fd, 0, page_pattern(kPageSize, 0, 1)));
  REQUIRE_OK(old_writer->sync(old_fd));
  REQUIRE_OK(old_writer->unlock(old_fd));
  // A new writer takes the lock while server 2 is down: server 2 misses its
  // fence's announcement, and its copies are left behind.
  cluster.server(2).kill();
  locked_write(cluster, "z", 1, 1);
  cluster.start_again(2);
  Outcome degraded = pagefile_admin(cluster.dir().path(), {"stat", "z", "--bus", cluster.bus()});
  REQUIRE(degraded.out.find("DEGRADED") != std::string::npos);
  // Past the page, the old writer writes it under its old token: refused
  // by server 1, which knows the new fence; server 2 must refuse it too.
  Status late;
  auto result = resync_with(cluster, "z", 2, 512, [&] {
    late = old_writer->write(old_fd, kOnOneAndTwo, page_pattern(kPageSize, kOnOneAndTwo, 7));
  });
  CHECK_CODE(late, Code::kStale);
  CHECK_OK(result.status());
  CHECK(server_two_holds(cluster, "z", 1));
}

TEST_CASE("resync: only what changed is copied; a server still down is said so, and --wait waits for it") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 90;  // 60 of them with a copy on each server
  auto client = cluster.client();
  const Fd fd = replicated_file(*client, "partly", kPages, 1);
  cluster.server(2).kill();
  for (int64_t p = 0; p < 30; ++p) REQUIRE_OK(client->write(fd, p, page_pattern(kPageSize, p, 2)));
  REQUIRE_OK(client->sync(fd));
  // Down: nothing to do but say so.
  Outcome early = pagefile_admin(cluster.dir().path(), {"resync", "partly", "--bus", cluster.bus()});
  CHECK(early.exit_status == 1);
  CHECK(early.out.find("is down; its copies stay stale") != std::string::npos);
  // Back: of its 60 pages, the 20 among 0..29 with a copy there changed.
  cluster.start_again(2);
  Outcome done = pagefile_admin(cluster.dir().path(), {"resync", "partly", "--wait", "--bus", cluster.bus()});
  INFO(done.out, done.err);
  CHECK(done.exit_status == 0);
  CHECK(done.out.find("is up to date: 20 of its 60 pages copied") != std::string::npos);
  // Nothing is left to do.
  Outcome again = pagefile_admin(cluster.dir().path(), {"resync", "--bus", cluster.bus()});
  CHECK(again.exit_status == 0);
  CHECK(again.out == "every copy is current, or goes with its file\n");
}

TEST_CASE("replace-server A A: a disk replaced at its own address is marked stale, resynced and served again") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 120;
  {
    auto client = cluster.client();
    (void)replicated_file(*client, "copied", kPages, 7);
    auto single = client->open("single", replicated(1));
    REQUIRE_OK(single);
    write_all(*client, *single, 12, 8);
  }
  // A client with the file open from before: it names the old directory.
  auto before = cluster.client();
  auto before_fd = before->open("copied", {.location = Location::kRemote});
  REQUIRE_OK(before_fd);

  // Server 2's disk is replaced: it comes back at its address, empty.
  const std::string address = cluster.server(2).address();
  const auto dir = cluster.dir() / "s2";
  cluster.server(2).kill();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  cluster.start_again(2);
  {
    // Readable meanwhile from the other copies; it refuses, not zeros.
    auto client = cluster.client();
    auto fd = client->open("copied", {.location = Location::kRemote});
    REQUIRE_OK(fd);
    CHECK(wrong_pages(*client, *fd, kPages, 7) == 0);
  }

  // A file with one copy lost its pages there: the replacement says so and
  // changes nothing until it is dealt with.
  const std::vector<std::string> replace = {"replace-server", address, address, "--bus", cluster.bus()};
  Outcome refused = pagefile_admin(cluster.dir().path(), replace);
  CHECK(refused.exit_status == 1);
  CHECK_MESSAGE(refused.err.find("single: keeps one copy of each page, and its pages on " + address +
                                 " are lost with its directory") != std::string::npos,
                refused.err);
  {
    auto client = cluster.client();
    REQUIRE_OK(client->unlink("single", Location::kRemote));  // the emptied directory's share counts as dropped
  }
  Outcome replaced = pagefile_admin(cluster.dir().path(), replace);
  INFO(replaced.out, replaced.err);
  REQUIRE(replaced.exit_status == 0);
  CHECK(replaced.out.find("copied: its copies on " + address + " are stale (a new directory there)") !=
        std::string::npos);
  Outcome stat = pagefile_admin(cluster.dir().path(), {"stat", "copied", "--bus", cluster.bus()});
  CHECK(stat.out.find("DEGRADED: stale on " + address) != std::string::npos);

  Outcome resync = pagefile_admin(cluster.dir().path(), {"resync", "--bus", cluster.bus()});
  INFO(resync.out, resync.err);
  CHECK(resync.exit_status == 0);
  CHECK(resync.out.find("copied: " + address + " is up to date") != std::string::npos);
  Outcome scrub = pagefile_admin(cluster.dir().path(), {"scrub", "--bus", cluster.bus()});
  CHECK_MESSAGE(scrub.exit_status == 0, scrub.out, scrub.err);

  // Server 1 dies: the pages it shared with server 2 come from the new
  // directory, to a new client and to the one from before (which learns
  // the new directory with its next lock).
  cluster.server(1).kill();
  auto client = cluster.client();
  auto fd = client->open("copied", {.location = Location::kRemote});
  REQUIRE_OK(fd);
  CHECK(wrong_pages(*client, *fd, kPages, 7) == 0);
  REQUIRE_OK(before->lock(*before_fd, LockMode::kShared, LockWait::kBlock));
  CHECK(wrong_pages(*before, *before_fd, kPages, 7) == 0);
  REQUIRE_OK(before->unlock(*before_fd));
  cluster.start_again(1);
}

TEST_CASE("replace-server: an empty server takes a dead one's place, resync fills it, and no page moves") {
  PagefiledCluster cluster(3, {"--cache-pages", "0"});
  constexpr int64_t kPages = 120;
  {
    auto client = cluster.client();
    for (Placement placement : {Placement::kStripe, Placement::kHash}) {
      auto fd = client->open(std::string(placement_name(placement)), replicated(2, placement));
      REQUIRE_OK(fd);
      write_all(*client, *fd, kPages, 6);
    }
  }
  // A client with the file open from before the replacement.
  auto before = cluster.client();
  auto before_fd = before->open("stripe", {.location = Location::kRemote});
  REQUIRE_OK(before_fd);
  const std::string dead = cluster.server(2).address();
  cluster.server(2).kill();
  ServerProcess fresh(free_tcp_address(), cluster.dir() / "fresh", {"--cache-pages", "0"});

  Outcome same = pagefile_admin(cluster.dir().path(), {"replace-server", dead, cluster.server(0).address(),
                                                       "--bus", cluster.bus()});
  CHECK(same.exit_status == 1);
  CHECK(same.err.find("is one of its servers already") != std::string::npos);
  Outcome replaced = pagefile_admin(cluster.dir().path(), {"replace-server", dead, fresh.address(), "--bus",
                                                           cluster.bus()});
  INFO(replaced.out, replaced.err);
  REQUIRE(replaced.exit_status == 0);
  CHECK(replaced.out.find("2 file(s) changed") != std::string::npos);
  Outcome stat = pagefile_admin(cluster.dir().path(), {"stat", "hash", "--bus", cluster.bus()});
  CHECK(stat.out.find("DEGRADED: stale on " + fresh.address()) != std::string::npos);
  // That client learns of it at its next lock, and is told to open the
  // file again (it knows nothing of the new server).
  auto told = before->lock(*before_fd, LockMode::kShared, LockWait::kTry);
  CHECK_CODE(told, Code::kStale);
  CHECK(told.message().find("open it again") != std::string::npos);
  // Readable meanwhile, from the copies on servers 0 and 1.
  {
    auto client = cluster.client();
    for (const char* name : {"stripe", "hash"}) {
      auto fd = client->open(name, {.location = Location::kRemote});
      REQUIRE_OK(fd);
      CHECK(wrong_pages(*client, *fd, kPages, 6) == 0);
    }
  }
  Outcome resync = pagefile_admin(cluster.dir().path(), {"resync", "--bus", cluster.bus()});
  INFO(resync.out, resync.err);
  CHECK(resync.exit_status == 0);
  CHECK(resync.out.find("stripe: " + fresh.address() + " is up to date: 80 of its 80 pages copied") !=
        std::string::npos);
  // Server 1 dies too: every page comes from server 0 or the new one.
  cluster.server(1).kill();
  auto client = cluster.client();
  for (const char* name : {"stripe", "hash"}) {
    CAPTURE(name);
    auto fd = client->open(name, {.location = Location::kRemote});
    REQUIRE_OK(fd);
    CHECK(wrong_pages(*client, *fd, kPages, 6) == 0);
  }
  cluster.start_again(1);
}
