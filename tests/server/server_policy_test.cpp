// The server's buffer pool under each file's policy, counted by the server:
// built-in policies over a loop that does not fit, and global-sequential's
// sliding window (TOPs 2.2) turning three clients' interleaved reads into
// one ascending pass over the disk. Servers run in this process on loopback
// TCP so the test can read their disk log; the clients are real Clients.
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "tests/support/cluster.h"

using namespace pagefile;
using namespace pagefile::test;
using pagefile::net::PageServer;
using pagefile::net::ServerOptions;

namespace {

constexpr uint32_t kPageSize = 4096;

OpenOptions remote(std::string policy) {
  return {.location = Location::kRemote,
          .page_size = kPageSize,
          .create = true,
          .policy = BufferPolicy{.name = std::move(policy)},
          .stripe_pages = 1};
}

void write_all(Client& client, Fd fd, int64_t pages) {
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < pages; ++p) {
    auto t = client.write_request(fd, p, page_pattern(kPageSize, p));
    REQUIRE_OK(t);
    tickets.push_back(*t);
  }
  for (Ticket t : tickets) REQUIRE_OK(client.write_confirm(t));
  REQUIRE_OK(client.sync(fd));
}

// The server's counters for the one file running `policy`.
FileCounters server_counters(const PageServer& server, std::string_view policy) {
  for (const auto& f : server.file_counters()) {
    if (f.policy == policy) return f.cache;
  }
  FAIL("no file runs policy " << policy);
  return {};
}

}  // namespace

TEST_CASE("global-sequential: three clients reading interleaved pages read the disk once, in ascending order") {
  for (size_t server_count : {size_t{1}, size_t{2}}) {
    CAPTURE(server_count);
    ServerOptions options;
    options.cache_pages = 4096;  // room for every page fetched ahead
    options.prefetch_pages = 16;
    PageServerCluster servers(server_count, options);
    constexpr int64_t kPages = 600;
    {
      auto writer = servers.client({.concurrency = 8});
      auto fd = writer->open("scan", remote("global-sequential"));
      REQUIRE_OK(fd);
      write_all(*writer, *fd, kPages);
      REQUIRE_OK(writer->close(*fd));
    }
    for (size_t i = 0; i < server_count; ++i) CHECK(servers.server(i).disk_read_log().empty());  // writes are not reads

    // Client k reads pages k, k + 3, k + 6, ... with 4 in flight.
    std::vector<std::thread> readers;
    std::vector<int> bad(3, 0);
    for (int k = 0; k < 3; ++k) {
      readers.emplace_back([&, k] {
        auto client = servers.client({.concurrency = 4});
        auto fd = client->open("scan", {.location = Location::kRemote});  // the recorded policy
        REQUIRE_OK(fd);
        auto st = client->status(*fd);
        REQUIRE_OK(st);
        CHECK(st->policy.name == "global-sequential");
        std::vector<std::vector<std::byte>> buffers(kPages / 3 + 1, std::vector<std::byte>(kPageSize));
        std::vector<std::pair<int64_t, Ticket>> tickets;
        for (int64_t p = k, i = 0; p < kPages; p += 3, ++i) {
          auto t = client->read_request(*fd, p, buffers[static_cast<size_t>(i)]);
          REQUIRE_OK(t);
          tickets.emplace_back(p, *t);
        }
        for (size_t i = 0; i < tickets.size(); ++i) {
          REQUIRE_OK(client->read_confirm(tickets[i].second));
          if (buffers[i] != page_pattern(kPageSize, tickets[i].first)) bad[static_cast<size_t>(k)]++;
        }
      });
    }
    for (auto& t : readers) t.join();
    CHECK(bad == std::vector<int>{0, 0, 0});

    int64_t read_in_all = 0;
    for (size_t i = 0; i < server_count; ++i) {
      auto log = servers.server(i).disk_read_log();
      std::vector<int64_t> pages;
      for (auto [file, page] : log) pages.push_back(page);
      CAPTURE(i);
      CHECK(std::is_sorted(pages.begin(), pages.end()));
      auto twice = std::adjacent_find(pages.begin(), pages.end());
      if (twice != pages.end()) MESSAGE(fmt::format("page {} read twice, at {} of {}", *twice, twice - pages.begin(), pages.size()));
      CHECK(twice == pages.end());  // none twice
      for (int64_t p : pages) CHECK(static_cast<size_t>(p) % server_count == i);  // its own pages only
      read_in_all += static_cast<int64_t>(pages.size());
      FileCounters c = server_counters(servers.server(i), "global-sequential");
      MESSAGE(fmt::format("server {} of {}: {} disk reads, hits {}, misses {}, prefetch used {}, wasted {}",
                          i, server_count, pages.size(), c.hits, c.misses, c.prefetch_used, c.prefetch_wasted));
      CHECK(c.prefetch_used > 0);
      CHECK(c.prefetch_wasted == 0);
    }
    CHECK(read_in_all == kPages);  // every page once
  }
}

TEST_CASE("the server pool runs each file's policy: a loop one page larger than the pool") {
  constexpr int64_t kFrames = 32;
  ServerOptions options;
  options.cache_pages = kFrames;
  options.prefetch_pages = 8;
  PageServerCluster one(1, options);
  PageServer& server = one.server(0);
  auto client = one.client({.concurrency = 8});
  constexpr int passes = 5;
  std::vector<std::byte> buf(kPageSize);
  // One file at a time, so each has the whole pool.
  for (std::string policy : {"random", "looping", "sequential"}) {
    CAPTURE(policy);
    auto fd = client->open(fmt::format("loop-{}", policy), remote(policy));
    REQUIRE_OK(fd);
    write_all(*client, *fd, kFrames + 1);
    auto read_pass = [&] {
      for (int64_t p = 0; p <= kFrames; ++p) {
        REQUIRE_OK(client->read(*fd, p, buf));
        CHECK(buf == page_pattern(kPageSize, p));
      }
    };
    read_pass();  // the loop settles
    FileCounters before = server_counters(server, policy);
    for (int i = 1; i < passes; ++i) read_pass();
    FileCounters after = server_counters(server, policy);
    uint64_t hits = after.hits - before.hits;
    uint64_t misses = after.misses - before.misses;
    MESSAGE(fmt::format("{}: {} passes of {} pages over {} frames: hits {}, misses {}, pages held {}", policy,
                        passes - 1, kFrames + 1, kFrames, hits, misses, after.pages));
    CHECK(hits + misses == static_cast<uint64_t>((passes - 1) * (kFrames + 1)));
    if (policy == "looping") {
      CHECK(hits >= static_cast<uint64_t>((passes - 1) * (kFrames - 1)));  // N-1 or N a pass
    } else {
      CHECK(hits == 0);  // LRU evicts each page just before it comes round; sequential tosses it
    }
    if (policy == "sequential") CHECK(after.pages <= options.prefetch_pages);
    REQUIRE_OK(client->close(*fd));
    REQUIRE_OK(client->unlink(fmt::format("loop-{}", policy), Location::kRemote));
  }
}
