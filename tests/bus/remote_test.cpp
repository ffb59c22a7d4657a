// Remote Pagefiles end to end: real pagefiled processes on loopback (tcp and
// unix) and the in-process bus; striped and hashed files over 1, 3 and 6
// servers; data across client restarts and server restarts.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "pagefile/pagefile.h"
#include "tests/support/cluster.h"
#include "tests/support/eventually.h"

using namespace pagefile;
using namespace pagefile::test;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}


// The clients here keep 12 requests of a file in flight, and give a request
// 10 s before it counts as lost.
ClientOptions client_options(uint32_t concurrency = 12, int timeout_ms = 10'000) {
  return {.concurrency = concurrency, .request_timeout_ms = timeout_ms};
}

OpenOptions remote(Placement placement, uint32_t stripe_pages = 1, uint32_t page_size = 4096) {
  return {.location = Location::kRemote,
          .page_size = page_size,
          .create = true,
          .placement = placement,
          .stripe_pages = stripe_pages};
}

// Two descriptors of the remote file `name`: the first creates it (striped),
// the second opens it as it is.
std::pair<Fd, Fd> two_descriptors(Client& client, const std::string& name) {
  auto first = client.open(name, remote(Placement::kStripe));
  auto second = client.open(name, {.location = Location::kRemote});
  REQUIRE_OK(first);
  REQUIRE_OK(second);
  return {*first, *second};
}

void write_all(Client& client, Fd fd, int64_t pages, uint32_t page_size, uint64_t seed) {
  write_patterns(client, fd, pages, page_size, seed);
}

// Reads pages [0, pages) pipelined and checks each, and the file's size.
void check_all(Client& client, Fd fd, int64_t pages, uint32_t page_size, uint64_t seed) {
  CHECK(wrong_patterns(client, fd, pages, page_size, seed) == 0);
  auto st = client.status(fd);
  REQUIRE_OK(st);
  CHECK(st->pages == pages);
}

}  // namespace

TEST_CASE("in-process bus: striped and hashed files over 1, 3 and 6 servers, across client restarts") {
  TempDir dir;
  for (int n : {1, 3, 6}) {
    std::string bus = fmt::format("inproc:{}", n);
    INFO(bus);
    {
      auto client = start_client(dir.path(), bus, client_options());
      auto striped = client->open(fmt::format("striped{}", n), remote(Placement::kStripe, 2));
      REQUIRE_OK(striped);
      auto hashed = client->open(fmt::format("hashed{}", n), remote(Placement::kHash, 1, 8192));
      REQUIRE_OK(hashed);
      write_all(*client, *striped, 100, 4096, n);
      write_all(*client, *hashed, 60, 8192, n + 100);
      check_all(*client, *striped, 100, 4096, n);
      check_all(*client, *hashed, 60, 8192, n + 100);
      std::vector<std::byte> buf(4096, std::byte{1});
      auto past = client->read(*striped, 100, buf);
      REQUIRE_OK(past);
      CHECK(*past == PageRead::kBeyondEnd);
      CHECK(buf == std::vector<std::byte>(4096));
      CHECK_OK(client->stop());
    }
    // A new client (its embedded servers restart over the same directories).
    auto client = start_client(dir.path(), bus, client_options());
    auto striped = client->open(fmt::format("striped{}", n), {.location = Location::kRemote});
    REQUIRE_OK(striped);
    auto hashed = client->open(fmt::format("hashed{}", n), {.location = Location::kRemote});
    REQUIRE_OK(hashed);
    check_all(*client, *striped, 100, 4096, n);
    check_all(*client, *hashed, 60, 8192, n + 100);
  }
}

TEST_CASE("pagefiled over tcp: 3 servers, stripe and hash, across server restarts") {
  PagefiledCluster servers(3);
  const std::string bus = servers.bus();
  {
    auto client = servers.client(client_options());
    auto striped = client->open("striped", remote(Placement::kStripe, 4, 1024));
    auto hashed = client->open("hashed", remote(Placement::kHash, 1, 2048));
    REQUIRE_OK(striped);
    REQUIRE_OK(hashed);
    write_all(*client, *striped, 200, 1024, 7);
    write_all(*client, *hashed, 150, 2048, 8);
    check_all(*client, *striped, 200, 1024, 7);
  }
  servers.restart();
  CHECK(servers.bus() == bus);
  auto client = servers.client(client_options());
  auto striped = client->open("striped", {.location = Location::kRemote});
  auto hashed = client->open("hashed", {.location = Location::kRemote, .page_size = 2048});
  REQUIRE_OK(striped);
  REQUIRE_OK(hashed);
  check_all(*client, *striped, 200, 1024, 7);
  check_all(*client, *hashed, 150, 2048, 8);
  CHECK_CODE(client->open("hashed", {.location = Location::kRemote, .page_size = 4096}), Code::kInvalidArgument);
}

TEST_CASE("pagefiled over unix sockets: 6 servers, and the catalog named explicitly") {
  // A cluster each: servers belong to the cluster of one catalog.
  for (bool name_catalog : {false, true}) {
    PagefiledCluster servers(6, {}, Listen::kUnix);
    const std::string bus = servers.bus();
    // The last server is the catalog here.
    std::string named = bus.substr(0, bus.rfind(',') + 1) + "catalog=" + servers.server(5).address();
    const std::string b = name_catalog ? named : bus;
    INFO(b);
    auto client = start_client(servers.dir().path(), b, client_options());
    std::string name = b == bus ? "six" : "six-named";
    auto striped = client->open(name, remote(Placement::kStripe, 1, 512));
    REQUIRE_OK(striped);
    write_all(*client, *striped, 300, 512, 3);
    check_all(*client, *striped, 300, 512, 3);
    auto hashed = client->open(name + "-hash", remote(Placement::kHash, 2, 65536));
    REQUIRE_OK(hashed);
    write_all(*client, *hashed, 24, 65536, 4);
    check_all(*client, *hashed, 24, 65536, 4);
  }
}

TEST_CASE("catalog: open without create, exclusive, unlink, truncate and size") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:2", client_options());
  CHECK_CODE(client->open("nope", {.location = Location::kRemote}), Code::kNotFound);
  auto fd = client->open("f", remote(Placement::kStripe));
  REQUIRE_OK(fd);
  CHECK_CODE(client->open("f", {.location = Location::kRemote, .create = true, .exclusive = true}),
             Code::kAlreadyExists);
  write_all(*client, *fd, 20, 4096, 1);
  CHECK_OK(client->truncate(*fd, 5));
  CHECK(client->status(*fd)->pages == 5);
  std::vector<std::byte> buf(4096);
  CHECK(*client->read(*fd, 7, buf) == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(4096));
  CHECK_OK(client->close(*fd));
  auto again = client->open("f", {.location = Location::kRemote});
  REQUIRE_OK(again);
  CHECK(client->status(*again)->pages == 5);  // the catalog kept the size
  CHECK_OK(client->close(*again));
  CHECK_OK(client->unlink("f", Location::kRemote));
  CHECK_CODE(client->open("f", {.location = Location::kRemote}), Code::kNotFound);
  CHECK_CODE(client->unlink("f", Location::kRemote), Code::kNotFound);
  // A new file of the same name starts empty: the old pages went with it.
  auto fresh = client->open("f", remote(Placement::kStripe));
  REQUIRE_OK(fresh);
  CHECK(*client->read(*fresh, 0, buf) == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(4096));
}

TEST_CASE("catalog: create_page_size is the size of a new file alone") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:2", client_options());
  auto page_size = [&](const Result<Fd>& fd) {
    REQUIRE_OK(fd);
    return client->status(*fd)->page_size;
  };
  const OpenOptions create{.location = Location::kRemote, .create_page_size = 16384, .create = true};
  CHECK(page_size(client->open("j", create)) == 16384);
  OpenOptions other = create;
  other.create_page_size = 8192;
  CHECK(page_size(client->open("j", other)) == 16384);  // it exists: its own
  other.exclusive = true;
  CHECK_CODE(client->open("j", other), Code::kAlreadyExists);
  CHECK(page_size(client->open("k", other)) == 8192);
  other.create = false;
  other.exclusive = false;
  CHECK_CODE(client->open("missing", other), Code::kNotFound);
}

TEST_CASE("a server that is down: a clear error, promptly, and no hang") {
  TempDir dir;
  // Nothing listens at a free port.
  auto client = start_client(dir.path(), free_tcp_address(), client_options(4, 3000));
  auto t0 = std::chrono::steady_clock::now();
  auto fd = client->open("f", remote(Placement::kStripe));
  CHECK_CODE(fd, Code::kDisconnected);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("a server that dies mid-run: writes in flight fail with kDisconnected; the rest keep working") {
  // 100 ms a write: some eight still queued at server 1 when it is killed
  // are most of a second of work, so the kill lands among them even if this
  // thread is paused on a loaded machine.
  PagefiledCluster servers(2, {"--disk-latency", "100"});
  auto client = servers.client(client_options(16, 5000));
  auto fd = client->open("f", remote(Placement::kStripe));
  REQUIRE_OK(fd);
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < 40; ++p) tickets.push_back(*client->write_request(*fd, p, page_pattern(4096, p)));
  servers.server(1).kill();  // holds the odd pages; the catalog (server 0) lives
  int failed = 0;
  int64_t lost = -1;  // a page whose write failed
  for (size_t i = 0; i < tickets.size(); ++i) {
    Status s = client->write_confirm(tickets[i]);
    if (!s) {
      CHECK(s.is(Code::kDisconnected));
      ++failed;
      lost = static_cast<int64_t>(i);
    }
  }
  CHECK(failed > 0);
  // The failed writes are not durable, so sync says so, once: the failure
  // is that sync's, not the file's.
  Status synced = client->sync(*fd);
  CHECK_FALSE(synced.is_ok());
  CHECK(synced.message().find("page(s) failed to write") != std::string::npos);
  // Pages on the living server still read.
  std::vector<std::byte> buf(4096);
  auto r = client->read(*fd, 0, buf);
  REQUIRE_OK(r);
  // A page whose write failed does not read as bytes never written.
  REQUIRE(lost >= 0);
  CHECK(client->read(*fd, lost, buf).status().message().find("its last write failed") != std::string::npos);
  // The server back, the file works again: writing the page clears it.
  servers.start_again(1);
  Status rewritten;
  for (int attempt = 0; attempt < 5; ++attempt) {  // the first may meet the broken connection
    rewritten = client->write(*fd, lost, page_pattern(4096, lost));
    if (rewritten.is_ok()) break;
  }
  REQUIRE_OK(rewritten);
  CHECK_OK(client->sync(*fd));
  REQUIRE_OK(client->read(*fd, lost, buf));
  CHECK(buf == page_pattern(4096, lost));
}

TEST_CASE("a lock held by a killed client is free after its lease, not before") {
  // A lease of 3 s, renewed every second: a holder's renewal a little late
  // on a loaded machine does not lose its lock.
  PagefiledCluster server(1, {"--lease-ms", "3000"});
  const std::string bus = server.bus();
  {
    auto setup = server.client(client_options());
    REQUIRE_OK(setup->open("locked", remote(Placement::kStripe)));
  }
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    ::close(ready[0]);
    auto client = Client::start({.bus = bus, .home = server.dir() / "home"});
    if (!client) _exit(10);
    auto fd = (*client)->open("locked", {.location = Location::kRemote});
    if (!fd || !(*client)->lock(*fd, LockMode::kExclusive)) _exit(11);
    char c = 'x';
    if (::write(ready[1], &c, 1) != 1) _exit(12);
    ::pause();  // renewing the lease in the background until killed
    _exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);

  auto client = server.client(client_options());
  auto fd = client->open("locked", {.location = Location::kRemote});
  REQUIRE_OK(fd);
  // Alive, the holder keeps the lock well past one lease.
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  CHECK_CODE(client->lock(*fd, LockMode::kShared), Code::kBusy);

  // (The clock read before the kill: a pause of this thread after it can
  // then only lengthen what is measured.)
  auto killed = std::chrono::steady_clock::now();
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  CHECK_CODE(client->lock(*fd, LockMode::kExclusive), Code::kBusy);
  // Poll, bounded: the lock must come a while after the kill (its last
  // renewal was at most lease/3 before, and a late one shortens the wait:
  // so at least a third of the lease) and within the lease plus slack.
  std::chrono::milliseconds got_after{-1};
  if (eventually([&] { return client->lock(*fd, LockMode::kExclusive).is_ok(); },
                 std::chrono::duration_cast<std::chrono::milliseconds>(killed + std::chrono::seconds(15) -
                                                                       std::chrono::steady_clock::now()),
                 std::chrono::milliseconds(50))) {
    got_after = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  }
  INFO("lock granted " << got_after.count() << " ms after the kill");
  CHECK(got_after.count() >= 1000);
  CHECK(got_after.count() <= 3000 + 3000);
}

TEST_CASE("remote locks are per descriptor, like local ones") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:2", client_options());
  auto [a, b] = two_descriptors(*client, "f");
  CHECK_OK(client->lock(a, LockMode::kExclusive));
  CHECK_CODE(client->lock(b, LockMode::kShared), Code::kBusy);
  CHECK_CODE(client->lock(b, LockMode::kExclusive), Code::kBusy);
  CHECK_OK(client->unlock(b));  // holds nothing: harmless, and a's lock stays
  CHECK_CODE(client->lock(b, LockMode::kShared), Code::kBusy);
  CHECK_OK(client->lock(a, LockMode::kShared));  // downgrade
  CHECK_OK(client->lock(b, LockMode::kShared));
  CHECK_CODE(client->lock(a, LockMode::kExclusive), Code::kBusy);
  CHECK_OK(client->close(b));  // releases b's lock
  CHECK_OK(client->lock(a, LockMode::kExclusive));
}

TEST_CASE("a descriptor with an older view of the size never shrinks the file") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:2", client_options());
  auto [a, b] = two_descriptors(*client, "f");
  write_all(*client, a, 10, 4096, 5);
  CHECK_OK(client->write(b, 0, page_pattern(4096, 0, 5)));
  CHECK_OK(client->close(b));  // b saw size 0, then 1; it must not record 1
  CHECK(client->status(a)->pages == 10);
  auto c = client->open("f", {.location = Location::kRemote});
  REQUIRE_OK(c);
  check_all(*client, *c, 10, 4096, 5);
  // b's successor sees a's size through status, which asks the catalog.
  auto d = client->open("f", {.location = Location::kRemote});
  CHECK(client->status(*d)->pages == 10);
  // A truncate shrinks for everyone; a read past the new end is zeros.
  CHECK_OK(client->truncate(a, 3));
  CHECK(client->status(*d)->pages == 3);
  std::vector<std::byte> buf(4096, std::byte{7});
  CHECK(*client->read(*d, 5, buf) == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(4096));
}

TEST_CASE("syncs of one descriptor from several threads all wait for durability") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:3", client_options());
  auto fd = client->open("f", remote(Placement::kHash));
  REQUIRE_OK(fd);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        int64_t page = t * 20 + i;
        if (!client->write(*fd, page, page_pattern(4096, page, 9))) ++failures;
        if (!client->sync(*fd)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  check_all(*client, *fd, 80, 4096, 9);
}

TEST_CASE("server_of names the server of a page as the file's placement does") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:3", client_options());
  auto striped = client->open("striped", remote(Placement::kStripe, 2));
  REQUIRE_OK(striped);
  // Round-robin in units of two pages over three servers.
  for (int64_t page = 0; page < 24; ++page) {
    CAPTURE(page);
    auto server = client->server_of(*striped, page);
    REQUIRE_OK(server);
    CHECK(*server == static_cast<uint32_t>((page / 2) % 3));
  }
  // Hashed: every server gets some of 300 pages, and the answer is stable.
  auto hashed = client->open("hashed", remote(Placement::kHash));
  REQUIRE_OK(hashed);
  std::vector<int> per_server(3);
  for (int64_t page = 0; page < 300; ++page) {
    auto server = client->server_of(*hashed, page);
    REQUIRE_OK(server);
    REQUIRE(*server < 3);
    ++per_server[*server];
    auto again = client->server_of(*hashed, page);
    REQUIRE_OK(again);
    CHECK(*again == *server);
  }
  for (int n : per_server) CHECK(n > 50);
  // A local file has one home; bad pages and descriptors are refused.
  auto local = client->open("local", {.create = true});
  REQUIRE_OK(local);
  auto home = client->server_of(*local, 5);
  REQUIRE_OK(home);
  CHECK(*home == 0);
  CHECK_CODE(client->server_of(*striped, -1).status(), Code::kInvalidArgument);
  CHECK_CODE(client->server_of(Fd{999}, 0).status(), Code::kInvalidArgument);
  CHECK_OK(client->stop());
}

// Reader `r` and writer `w` are descriptors of one remote file, in one
// client or two. What r kept stays good exactly while no writer came.
void check_unchanged_since_unlock(Client& rc, Fd r, Client& wc, Fd w) {
  auto relock = [&] {
    REQUIRE_OK(rc.set_lock_level(r, LockLevel::kNone));
    REQUIRE_OK(rc.set_lock_level(r, LockLevel::kShared));
    return rc.unchanged_since_unlock(r);
  };
  CHECK_FALSE(rc.unchanged_since_unlock(r));  // no lock
  REQUIRE_OK(rc.set_lock_level(r, LockLevel::kShared));
  CHECK_FALSE(rc.unchanged_since_unlock(r));  // the first lock knows nothing before it
  CHECK(relock());
  CHECK(relock());

  // Another reader comes and goes: still unchanged.
  REQUIRE_OK(wc.set_lock_level(w, LockLevel::kShared));
  REQUIRE_OK(wc.set_lock_level(w, LockLevel::kNone));
  CHECK(relock());

  // A writer commits two pages more: changed once, and the grant's size shows them.
  REQUIRE_OK(rc.set_lock_level(r, LockLevel::kNone));
  REQUIRE_OK(wc.set_lock_level(w, LockLevel::kShared));
  REQUIRE_OK(wc.set_lock_level(w, LockLevel::kReserved));
  REQUIRE_OK(wc.set_lock_level(w, LockLevel::kExclusive));
  auto before = wc.status(w);
  REQUIRE_OK(before);
  REQUIRE_OK(wc.write(w, before->pages, page_pattern(4096, before->pages, 9)));
  REQUIRE_OK(wc.write(w, before->pages + 1, page_pattern(4096, before->pages + 1, 9)));
  REQUIRE_OK(wc.sync(w));
  REQUIRE_OK(wc.set_lock_level(w, LockLevel::kNone));
  REQUIRE_OK(rc.set_lock_level(r, LockLevel::kShared));
  CHECK_FALSE(rc.unchanged_since_unlock(r));
  CHECK(rc.status(r)->pages == before->pages + 2);
  std::vector<std::byte> page(4096);
  CHECK(*rc.read(r, before->pages + 1, page) == PageRead::kData);
  CHECK(page == page_pattern(4096, before->pages + 1, 9));
  CHECK(relock());

  // A writer that takes no lock but grows the file (its sync records the
  // size) moves the version too.
  REQUIRE_OK(rc.set_lock_level(r, LockLevel::kNone));
  REQUIRE_OK(wc.write(w, before->pages + 2, page_pattern(4096, before->pages + 2, 9)));
  REQUIRE_OK(wc.sync(w));
  REQUIRE_OK(rc.set_lock_level(r, LockLevel::kShared));
  CHECK_FALSE(rc.unchanged_since_unlock(r));
  CHECK(rc.status(r)->pages == before->pages + 3);
  REQUIRE_OK(rc.set_lock_level(r, LockLevel::kNone));
  CHECK_FALSE(rc.unchanged_since_unlock(r));  // no lock held
}

TEST_CASE("unchanged_since_unlock: a lock's grant tells a reader whether a writer came since its last lock") {
  SUBCASE("two descriptors of one client, embedded catalog (direct calls)") {
    TempDir dir;
    auto client = start_client(dir.path(), "inproc:2", client_options());
    auto [r, w] = two_descriptors(*client, "v");
    write_all(*client, w, 4, 4096, 3);
    check_unchanged_since_unlock(*client, r, *client, w);
  }
  SUBCASE("two clients of pagefiled over tcp") {
    PagefiledCluster server(1);
    TempDir da, db;
    auto reader = start_client(da.path(), server.bus(), client_options());
    auto writer = start_client(db.path(), server.bus(), client_options());
    auto r = reader->open("v", remote(Placement::kStripe));
    REQUIRE_OK(r);
    auto w = writer->open("v", {.location = Location::kRemote});
    REQUIRE_OK(w);
    write_all(*writer, *w, 4, 4096, 3);
    check_unchanged_since_unlock(*reader, *r, *writer, *w);
  }
  SUBCASE("a restarted catalog is a change") {
    PagefiledCluster server(1);
    TempDir da;
    auto client = start_client(da.path(), server.bus(), client_options());
    auto r = client->open("v", remote(Placement::kStripe));
    REQUIRE_OK(r);
    REQUIRE_OK(client->set_lock_level(*r, LockLevel::kShared));
    REQUIRE_OK(client->set_lock_level(*r, LockLevel::kNone));
    server.restart();
    Status s;
    for (int i = 0; i < 50; ++i) {  // the client reconnects on its next request
      s = client->set_lock_level(*r, LockLevel::kShared);
      if (s) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE_OK(s);
    CHECK_FALSE(client->unchanged_since_unlock(*r));
  }
}

TEST_CASE("embedded bus: a read answered from a server's cache on the caller's thread never overtakes a write") {
  TempDir dir;
  auto client = start_client(dir.path(), "inproc:2", client_options(/*concurrency=*/16));
  auto [a, b] = two_descriptors(*client, "direct");
  write_all(*client, a, 8, 4096, 1);  // every page now in the servers' caches
  REQUIRE(client->status(b)->pages == 8);  // b learns the size (a read past what it knows is zeros)
  std::vector<std::byte> page(4096);
  for (uint64_t round = 2; round < 40; ++round) {
    int64_t p = static_cast<int64_t>(round % 8);
    // Unconfirmed writes, then reads of the same pages through this
    // descriptor and through another one (whose own queue is empty).
    auto w = client->write_request(a, p, page_pattern(4096, p, round));
    REQUIRE_OK(w);
    auto w2 = client->write_request(a, (p + 1) % 8, page_pattern(4096, (p + 1) % 8, round));
    REQUIRE_OK(w2);
    auto r = client->read_request(b, p, page);
    REQUIRE_OK(r);
    REQUIRE_OK(client->read_confirm(*r));
    // b's read may come before or after a's unconfirmed write, never
    // from a mix.
    CHECK((page == page_pattern(4096, p, round) || page == page_pattern(4096, p, round - 1) ||
           page == page_pattern(4096, p, 1)));
    REQUIRE_OK(client->read(a, p, page));
    CHECK(page == page_pattern(4096, p, round));  // a's own read comes after its write
    REQUIRE_OK(client->write_confirm(*w));
    REQUIRE_OK(client->write_confirm(*w2));
    REQUIRE_OK(client->read(b, p, page));
    CHECK(page == page_pattern(4096, p, round));  // confirmed: everyone sees it
  }
}

TEST_CASE("a file opened before its cluster was created again on empty directories cannot reach the file that got its id") {
  PagefiledCluster servers(2);
  auto old_client = servers.client(client_options());
  auto old_fd = old_client->open("old", remote(Placement::kStripe, 1, 4096));
  REQUIRE_OK(old_fd);
  std::vector<std::byte> a(4096, std::byte{'A'}), b(4096, std::byte{'B'}), x(4096, std::byte{'X'});
  REQUIRE_OK(old_client->write(*old_fd, 0, a));
  REQUIRE_OK(old_client->sync(*old_fd));

  servers.restart(/*empty=*/true);  // a new catalog: a new cluster, whose ids start again
  auto new_client = servers.client(client_options());
  auto new_fd = new_client->open("new", remote(Placement::kStripe, 1, 4096));
  REQUIRE_OK(new_fd);
  REQUIRE_OK(new_client->write(*new_fd, 0, b));
  REQUIRE_OK(new_client->sync(*new_fd));

  // The old descriptor's requests: refused, however often it tries (the
  // first may meet the broken connection).
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    last = old_client->write(*old_fd, 0, x);
    if (last.is_ok()) last = old_client->sync(*old_fd);
    REQUIRE_FALSE(last.is_ok());
    if (!last.is(Code::kDisconnected)) break;
  }
  CHECK_CODE(last, Code::kStale);
  CHECK(last.message().find("cluster") != std::string::npos);
  std::vector<std::byte> got(4096);
  CHECK_CODE(old_client->read(*old_fd, 0, got).status(), Code::kStale);

  REQUIRE_OK(new_client->read(*new_fd, 0, got));
  CHECK(got == b);
}

TEST_CASE("a server whose directory was emptied refuses the pages it lost instead of answering zeros") {
  PagefiledCluster servers(3);
  const auto lost_dir = servers.dir() / "s1";
  constexpr int64_t kPages = 12;
  auto client = servers.client(client_options());
  auto one = client->open("one", remote(Placement::kStripe, 1, 4096));
  REQUIRE_OK(one);
  OpenOptions copied = remote(Placement::kStripe, 1, 4096);
  copied.replicas = 2;
  auto two = client->open("two", copied);
  REQUIRE_OK(two);
  for (int64_t p = 0; p < kPages; ++p) {
    REQUIRE_OK(client->write(*one, p, page_pattern(4096, p, 1)));
    REQUIRE_OK(client->write(*two, p, page_pattern(4096, p, 2)));
  }
  REQUIRE_OK(client->sync(*one));
  REQUIRE_OK(client->sync(*two));
  // The directory names its cluster and itself.
  const std::string membership = read_text(lost_dir / "cluster");
  CHECK(std::count(membership.begin(), membership.end(), '\n') == 2);

  // Its disk did not mount: the server starts on an empty directory.
  servers.server(1).kill();
  std::filesystem::remove_all(lost_dir);
  std::filesystem::create_directories(lost_dir);
  servers.start_again(1);

  // Every page reads as written, or fails saying why; never as zeros. The
  // file open before (its first request may meet the broken connection)
  // and a client that opens it now alike.
  auto later = servers.client(client_options());
  auto later_one = later->open("one", {.location = Location::kRemote});
  REQUIRE_OK(later_one);
  for (auto [c, fd] : {std::pair{client.get(), *one}, std::pair{later.get(), *later_one}}) {
    int refused = 0;
    std::vector<std::byte> got(4096);
    for (int64_t p = 0; p < kPages; ++p) {
      Result<PageRead> read = c->read(fd, p, got);
      for (int attempt = 0; attempt < 3 && read.status().is(Code::kDisconnected); ++attempt) read = c->read(fd, p, got);
      if (read) {
        CHECK_MESSAGE(got == page_pattern(4096, p, 1), "page " << p);
        continue;
      }
      ++refused;
      CHECK_CODE(read.status(), Code::kIOError);
      CHECK_MESSAGE(read.status().message().find("emptied") != std::string::npos, read.status().to_string());
    }
    CHECK(refused == kPages / 3);  // the server's third of the pages
  }
  // It joined no cluster meanwhile: what the catalog knows of it still holds.
  CHECK_FALSE(std::filesystem::exists(lost_dir / "cluster"));

  // Where each page has another copy, that one serves it.
  auto later_two = later->open("two", {.location = Location::kRemote});
  REQUIRE_OK(later_two);
  std::vector<std::byte> got(4096);
  for (int64_t p = 0; p < kPages; ++p) {
    REQUIRE_OK(later->read(*later_two, p, got));
    CHECK_MESSAGE(got == page_pattern(4096, p, 2), "page " << p);
  }
}

TEST_CASE("a server that was down when a file was opened is asked its directory before it takes a write") {
  PagefiledCluster servers(3);
  const auto lost_dir = servers.dir() / "s1";
  constexpr int64_t kPages = 12;
  servers.server(1).kill();
  auto client = servers.client(client_options());
  auto fd = client->open("f", remote(Placement::kStripe, 1, 4096));
  REQUIRE_OK(fd);  // the catalog is on server 0; server 1's directory stays unknown
  servers.start_again(1);
  for (int64_t p = 0; p < kPages; ++p) {
    Status written = client->write(*fd, p, page_pattern(4096, p));
    for (int attempt = 0; attempt < 3 && written.is(Code::kDisconnected); ++attempt) {
      written = client->write(*fd, p, page_pattern(4096, p));
    }
    REQUIRE_OK(written);
  }
  REQUIRE_OK(client->sync(*fd));

  // Emptied: a client that opens the file now finds the directory the
  // catalog learned before the writes, not the empty one.
  servers.server(1).kill();
  std::filesystem::remove_all(lost_dir);
  std::filesystem::create_directories(lost_dir);
  servers.start_again(1);
  auto later = servers.client(client_options());
  auto later_fd = later->open("f", {.location = Location::kRemote});
  REQUIRE_OK(later_fd);
  int refused = 0;
  std::vector<std::byte> got(4096);
  for (int64_t p = 0; p < kPages; ++p) {
    Result<PageRead> read = later->read(*later_fd, p, got);
    if (read) {
      CHECK_MESSAGE(got == page_pattern(4096, p), "page " << p);
      continue;
    }
    ++refused;
    CHECK_CODE(read.status(), Code::kIOError);
  }
  CHECK(refused == kPages / 3);
}

TEST_CASE("a bus that lists a server holding pages first makes no catalog there: the cluster's files stay whole") {
  PagefiledCluster servers(2);
  auto client = servers.client(client_options());
  auto fd = client->open("f1", remote(Placement::kStripe, 2, 4096));
  REQUIRE_OK(fd);
  for (int64_t p = 0; p < 4; ++p) REQUIRE_OK(client->write(*fd, p, page_pattern(4096, p)));
  REQUIRE_OK(client->sync(*fd));
  const auto second_dir = servers.dir() / "s1";
  REQUIRE(std::filesystem::exists(second_dir / "cluster"));
  const auto cluster_before = read_text(second_dir / "cluster");

  // The same servers, the second first: it holds f1's pages and no catalog.
  const std::string bus = servers.bus();
  const auto comma = bus.find(',');
  REQUIRE(comma != std::string::npos);
  auto reversed = start_client(servers.dir() / "reversed", bus.substr(comma + 1) + "," + bus.substr(0, comma),
                               client_options());
  auto refused = reversed->open("g1", remote(Placement::kStripe, 2, 4096));
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(refused.status().message().find("no catalog") != std::string::npos);
  // (Or its own catalog was moved away, as pagefiled advises for a damaged
  // one: then its shares must go too, and the message says so.)
  CHECK(refused.status().message().find("move " + (second_dir / "shares").string() + " away too") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(second_dir / "catalog.db"));
  CHECK(read_text(second_dir / "cluster") == cluster_before);

  std::vector<std::byte> got(4096);
  for (int64_t p = 0; p < 4; ++p) {
    REQUIRE_OK(client->read(*fd, p, got));
    CHECK(got == page_pattern(4096, p));
  }
}
