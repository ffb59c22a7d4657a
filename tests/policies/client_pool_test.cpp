// The buffer pool through the Client: hits, misses and read-ahead counted on
// local files and on files of real pagefiled processes, and every read
// returning the data last written.
#include <chrono>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "pagefile/pagefile.h"
#include "pagefile/policy.h"
#include "tests/policies/clock_policy.h"
#include "tests/support/cluster.h"
#include "tests/support/eventually.h"

using namespace pagefile;
using namespace pagefile::test;

namespace {

constexpr uint32_t kPageSize = 1024;

// A client with a pool of `cache_pages` (0: none).
std::unique_ptr<Client> start(const TempDir& dir, uint32_t cache_pages, uint32_t concurrency = 4,
                              const std::string& bus = "inproc:1",
                              std::shared_ptr<const PolicyRegistry> policies = nullptr) {
  return start_client(dir.path(), bus,
                      {.concurrency = concurrency,
                       .request_timeout_ms = 10'000,
                       .cache_pages = cache_pages,
                       .policies = std::move(policies)});
}

OpenOptions with_policy(std::string_view name, uint32_t max_pages = 0, Location location = Location::kLocal) {
  return {.location = location,
          .page_size = kPageSize,
          .create = true,
          .policy = BufferPolicy{.max_pages = max_pages, .name = std::string(name)}};
}

void write_pages(Client& client, Fd fd, int64_t pages, uint64_t seed) {
  for (int64_t p = 0; p < pages; ++p) REQUIRE_OK(client.write(fd, p, page_pattern(kPageSize, p, seed)));
}

// Reads `page` and checks it holds the pattern of `seed`.
void check_page(Client& client, Fd fd, int64_t page, uint64_t seed) {
  std::vector<std::byte> buf(kPageSize);
  auto r = client.read(fd, page, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kData);
  INFO("page " << page << " seed " << seed);
  CHECK(buf == page_pattern(kPageSize, page, seed));
}

// Creates the local file `name` under `policy` and writes pages [0, pages)
// of `seed`.
Fd create_written(Client& client, const std::string& name, std::string_view policy, int64_t pages, uint64_t seed) {
  auto fd = client.open(name, with_policy(policy));
  REQUIRE_OK(fd);
  write_pages(client, *fd, pages, seed);
  return *fd;
}

FileCounters counters(Client& client, Fd fd) {
  auto c = client.counters(fd);
  REQUIRE_OK(c);
  return *c;
}

}  // namespace

TEST_CASE("without a pool nothing is counted and pin is not supported") {
  TempDir dir;
  auto client = start(dir, 0);
  Fd fd = create_written(*client, "f", "random", 4, 1);
  for (int64_t p = 0; p < 4; ++p) check_page(*client, fd, p, 1);
  CHECK(counters(*client, fd) == FileCounters{});
  CHECK_CODE(client->pin(fd, 0), Code::kNotSupported);
  CHECK_OK(client->drop_cached(fd));
}

TEST_CASE("local file: misses then hits, counted per file and reported by status") {
  TempDir dir;
  auto client = start(dir, 64);
  Fd fd = create_written(*client, "f", "random", 32, 1);
  CHECK_OK(client->drop_cached(fd));  // the writes put the pages in the pool
  for (int64_t p = 0; p < 32; ++p) check_page(*client, fd, p, 1);
  FileCounters c = counters(*client, fd);
  CHECK(c.misses == 32);
  CHECK(c.hits == 0);
  CHECK(c.pages == 32);
  for (int64_t p = 0; p < 32; ++p) check_page(*client, fd, p, 1);
  c = counters(*client, fd);
  CHECK(c.hits == 32);
  CHECK(c.misses == 32);
  auto st = client->status(fd);
  REQUIRE_OK(st);
  CHECK(st->cache == c);
  CHECK(policy_name(st->policy) == "random");
  CHECK(st->cache.allowance == 64);
}

TEST_CASE("local file: looping keeps N-1 of N+1 pages a pass where random (LRU) keeps none") {
  TempDir dir;
  auto client = start(dir, 8);
  for (std::string_view policy : {"looping", "random"}) {
    auto fd = client->open(fmt::format("loop-{}", policy), with_policy(policy));
    REQUIRE_OK(fd);
    write_pages(*client, *fd, 9, 2);
    CHECK_OK(client->drop_cached(*fd));
    for (int pass = 0; pass < 4; ++pass) {
      uint64_t before = counters(*client, *fd).hits;
      for (int64_t p = 0; p < 9; ++p) check_page(*client, *fd, p, 2);
      uint64_t hits = counters(*client, *fd).hits - before;
      INFO(policy << " pass " << pass);
      if (policy == "random" || pass == 0) {
        CHECK(hits == 0);
      } else {
        CHECK(hits >= 7);
      }
    }
    CHECK_OK(client->close(*fd));
  }
}

TEST_CASE("local file: sequential reads ahead within the window and keeps no more") {
  TempDir dir;
  constexpr uint32_t kWindow = 4;
  auto client = start(dir, 64, kWindow);
  Fd fd = create_written(*client, "scan", "sequential", 200, 3);
  CHECK_OK(client->drop_cached(fd));
  for (int64_t p = 0; p < 200; ++p) {
    check_page(*client, fd, p, 3);
    CHECK(counters(*client, fd).pages <= kWindow);
  }
  FileCounters c = counters(*client, fd);
  CHECK(c.hits + c.misses == 200);
  CHECK(c.prefetch_used == c.hits);  // a scan hits only on what was fetched ahead
  CHECK(c.hits >= 150);
  CHECK(c.allowance == kWindow);
  MESSAGE("sequential scan of 200 pages, window 4: hits ", c.hits, ", misses ", c.misses,
          ", prefetch used ", c.prefetch_used, ", wasted ", c.prefetch_wasted);
}

TEST_CASE("local file: read-ahead stops at the end of the file and follows it when another client grows it") {
  TempDir dir;
  auto client = start(dir, 64, 32);
  Fd fd = create_written(*client, "tail", "sequential", 8, 5);
  CHECK_OK(client->drop_cached(fd));
  auto in_flight = [&] {
    auto st = client->status(fd);
    REQUIRE_OK(st);
    return st->in_flight;
  };
  // The first scan reads ahead past page 7 once and learns where the file ends.
  for (int64_t p = 0; p < 8; ++p) check_page(*client, fd, p, 5);
  REQUIRE(eventually([&] { return in_flight() == 0; }, std::chrono::seconds(10), std::chrono::milliseconds(10)));
  // From then on nothing is asked past it: a scan that starts again at page
  // 0 finds the window free.
  check_page(*client, fd, 7, 5);
  CHECK(in_flight() == 0);

  // Another client appends pages 8..15: a read past the old end finds data,
  // and the pages after it are read ahead again.
  auto other = start(dir, 0);
  auto w = other->open("tail", with_policy("sequential"));
  REQUIRE_OK(w);
  for (int64_t p = 8; p < 16; ++p) REQUIRE_OK(other->write(*w, p, page_pattern(kPageSize, p, 5)));
  CHECK_OK(other->sync(*w));
  FileCounters before = counters(*client, fd);
  for (int64_t p = 8; p < 16; ++p) check_page(*client, fd, p, 5);
  FileCounters after = counters(*client, fd);
  CHECK(after.misses - before.misses == 1);
  CHECK(after.hits - before.hits == 7);
  CHECK_OK(other->close(*w));
  CHECK_OK(client->close(fd));
}

TEST_CASE("local file: every read returns the data last written, under pipelined requests") {
  for (std::string_view policy : {"random", "looping", "sequential"}) {
    INFO(policy);
    TempDir dir;
    auto client = start(dir, 6, 8);
    auto fd = client->open("mix", with_policy(policy));
    REQUIRE_OK(fd);
    constexpr int64_t kPages = 24;
    std::vector<uint64_t> seed(kPages, 0);
    write_pages(*client, *fd, kPages, 0);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int64_t> any(0, kPages - 1);
    std::uniform_int_distribution<int> coin(0, 2);
    // Batches of requests left unconfirmed until the batch ends, so reads
    // and writes of one page overlap in flight.
    std::vector<std::vector<std::byte>> buffers(16, std::vector<std::byte>(kPageSize));
    for (int batch = 0; batch < 200; ++batch) {
      struct Pending { Ticket ticket; bool write; int64_t page; uint64_t expect; size_t buffer; };
      std::vector<Pending> pending;
      for (size_t i = 0; i < buffers.size(); ++i) {
        int64_t page = any(rng);
        if (coin(rng) == 0) {
          seed[page] = static_cast<uint64_t>(batch * 100 + static_cast<int>(i) + 1);
          auto t = client->write_request(*fd, page, page_pattern(kPageSize, page, seed[page]));
          REQUIRE_OK(t);
          pending.push_back({*t, true, page, 0, 0});
        } else {
          auto t = client->read_request(*fd, page, buffers[i]);
          REQUIRE_OK(t);
          pending.push_back({*t, false, page, seed[page], i});
        }
      }
      for (const Pending& p : pending) {
        if (p.write) {
          REQUIRE_OK(client->write_confirm(p.ticket));
        } else {
          REQUIRE_OK(client->read_confirm(p.ticket));
          INFO("page " << p.page);
          REQUIRE(buffers[p.buffer] == page_pattern(kPageSize, p.page, p.expect));
        }
      }
      if (batch % 50 == 49) CHECK_OK(client->drop_cached(*fd));
    }
    FileCounters c = counters(*client, *fd);
    CHECK(c.hits > 0);
    CHECK(c.misses > 0);
    CHECK(c.pages <= 6);
  }
}

TEST_CASE("local file: truncate drops pooled pages beyond the end") {
  TempDir dir;
  auto client = start(dir, 32);
  Fd fd = create_written(*client, "t", "random", 10, 4);
  CHECK(counters(*client, fd).pages == 10);
  CHECK_OK(client->truncate(fd, 5));
  CHECK(counters(*client, fd).pages == 5);
  std::vector<std::byte> buf(kPageSize, std::byte{7});
  auto r = client->read(fd, 7, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kBeyondEnd);
  CHECK_OK(client->truncate(fd, 10));
  r = client->read(fd, 7, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kData);
  CHECK(buf == std::vector<std::byte>(kPageSize));
  check_page(*client, fd, 3, 4);
}

TEST_CASE("local file: a pinned page stays through a scan far larger than the pool") {
  TempDir dir;
  auto client = start(dir, 4);
  Fd fd = create_written(*client, "p", "random", 60, 5);
  CHECK_OK(client->drop_cached(fd));
  CHECK_OK(client->pin(fd, 0));  // reads it in
  CHECK(counters(*client, fd).misses == 1);
  for (int64_t p = 1; p < 60; ++p) check_page(*client, fd, p, 5);
  uint64_t hits = counters(*client, fd).hits;
  check_page(*client, fd, 0, 5);
  CHECK(counters(*client, fd).hits == hits + 1);
  CHECK(counters(*client, fd).pinned == 1);
  CHECK_OK(client->unpin(fd, 0));
  CHECK_CODE(client->unpin(fd, 0), Code::kInvalidArgument);
  CHECK_CODE(client->pin(fd, -1), Code::kInvalidArgument);
}

TEST_CASE("a custom policy is selected by name, recorded in the file, and falls back when unknown") {
  TempDir dir;
  auto policies = PolicyRegistry::with_builtins();
  REQUIRE_OK(policies->add("clock", [](const PolicyLimits&) { return std::make_unique<ClockPolicy>(); }));
  {
    auto client = start(dir, 8, 4, "inproc:1", policies);
    auto fd = client->open("c", {.page_size = kPageSize,
                                 .create = true,
                                 .policy = BufferPolicy{.access = AccessType::kLooping, .name = "clock"}});
    REQUIRE_OK(fd);
    write_pages(*client, *fd, 20, 6);
    for (int64_t p = 0; p < 20; ++p) check_page(*client, *fd, p, 6);
    CHECK(counters(*client, *fd).pages == 8);
    CHECK(counters(*client, *fd).evictions > 0);
    CHECK_OK(client->close(*fd));
    auto again = client->open("c", {});
    REQUIRE_OK(again);
    CHECK(client->status(*again)->policy.name == "clock");
    CHECK_CODE(client->open("d", with_policy("no-such-policy")), Code::kInvalidArgument);
  }
  auto plain = start(dir, 8);
  auto fd = plain->open("c", {});
  REQUIRE_OK(fd);
  auto st = plain->status(*fd);
  REQUIRE_OK(st);
  CHECK(policy_name(st->policy) == "looping");  // the built-in recorded beside it
  check_page(*plain, *fd, 5, 6);
}

TEST_CASE("remote files on pagefiled: counters, read-ahead, and drop_cached after another client's write") {
  PagefiledCluster servers(2);
  auto reader = start(servers.dir(), 32, 4, servers.bus());
  auto writer = start(servers.dir(), 0, 4, servers.bus());

  auto w = writer->open("shared", with_policy("random", 0, Location::kRemote));
  REQUIRE_OK(w);
  write_pages(*writer, *w, 40, 7);
  CHECK_OK(writer->sync(*w));

  auto r = reader->open("shared", {.location = Location::kRemote,
                                   .policy = BufferPolicy{.access = AccessType::kRandom, .max_pages = 16}});
  REQUIRE_OK(r);
  for (int64_t p = 0; p < 16; ++p) check_page(*reader, *r, p, 7);
  for (int64_t p = 0; p < 16; ++p) check_page(*reader, *r, p, 7);
  FileCounters c = counters(*reader, *r);
  CHECK(c.misses == 16);
  CHECK(c.hits == 16);
  CHECK(c.allowance == 16);

  // Another client rewrites pages the reader holds: the pool still serves
  // the old ones until told to drop them.
  for (int64_t p = 0; p < 16; ++p) REQUIRE_OK(writer->write(*w, p, page_pattern(kPageSize, p, 8)));
  check_page(*reader, *r, 3, 7);
  CHECK_OK(reader->drop_cached(*r));
  for (int64_t p = 0; p < 16; ++p) check_page(*reader, *r, p, 8);
  // The reader's own writes are read back at once.
  REQUIRE_OK(reader->write(*r, 2, page_pattern(kPageSize, 2, 9)));
  check_page(*reader, *r, 2, 9);
  check_page(*writer, *w, 2, 9);

  // A sequential scan of the remote file reads ahead over the bus.
  auto s = reader->open("shared", {.location = Location::kRemote,
                                   .policy = BufferPolicy{.access = AccessType::kSequential}});
  REQUIRE_OK(s);
  for (int64_t p = 16; p < 40; ++p) check_page(*reader, *s, p, 7);
  c = counters(*reader, *s);
  CHECK(c.hits + c.misses == 24);
  CHECK(c.prefetch_used > 0);
  CHECK(c.pages <= 4);
  MESSAGE("remote sequential scan of 24 pages, window 4: hits ", c.hits, ", misses ", c.misses,
          ", prefetch used ", c.prefetch_used, ", wasted ", c.prefetch_wasted);
}
