// The concurrency window, per-page order, and many threads on one client.
#include <thread>

#include "pagefile/pagefile.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using pagefile::test::page_pattern;
using pagefile::test::TempDir;

namespace {

std::unique_ptr<Client> start(const TempDir& dir, uint32_t concurrency, uint32_t threads = 8) {
  auto c = Client::start({.local_dir = dir.path(), .concurrency = concurrency, .io_threads = threads});
  REQUIRE_OK(c);
  return std::move(*c);
}

}  // namespace

TEST_CASE("one thread may issue far more requests than the window without deadlock") {
  TempDir dir;
  auto client = start(dir, 2);
  Fd fd = *client->open("f", {.page_size = 512, .create = true});
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < 200; ++p) {
    auto t = client->write_request(fd, p, page_pattern(512, p));
    REQUIRE_OK(t);
    tickets.push_back(*t);
    auto st = client->status(fd);
    CHECK(st->in_flight <= 2);  // never more I/O in flight than the window
  }
  for (auto it = tickets.rbegin(); it != tickets.rend(); ++it) CHECK_OK(client->write_confirm(*it));
  std::vector<std::byte> buf(512);
  for (int64_t p = 0; p < 200; ++p) {
    REQUIRE(*client->read(fd, p, buf) == PageRead::kData);
    CHECK(buf == page_pattern(512, p));
  }
}

TEST_CASE("requests on one page keep their order; reads see earlier writes") {
  TempDir dir;
  auto client = start(dir, 64, 16);
  Fd fd = *client->open("f", {.page_size = 1024, .create = true});
  constexpr int kPages = 16;
  constexpr int kVersions = 6;
  std::vector<Ticket> writes;
  std::vector<std::pair<Ticket, int>> reads;  // ticket, version it must see
  std::vector<std::vector<std::byte>> buffers(kPages * kVersions, std::vector<std::byte>(1024));
  for (int v = 1; v <= kVersions; ++v) {
    for (int64_t p = 0; p < kPages; ++p) {
      writes.push_back(*client->write_request(fd, p, page_pattern(1024, p, v)));
      auto& buf = buffers[(v - 1) * kPages + p];
      reads.emplace_back(*client->read_request(fd, p, buf), v);
    }
  }
  for (size_t i = 0; i < reads.size(); ++i) {
    REQUIRE(*client->read_confirm(reads[i].first) == PageRead::kData);
    int64_t p = static_cast<int64_t>(i % kPages);
    CHECK(buffers[i] == page_pattern(1024, p, reads[i].second));
  }
  for (Ticket t : writes) CHECK_OK(client->write_confirm(t));
  std::vector<std::byte> buf(1024);
  for (int64_t p = 0; p < kPages; ++p) {
    REQUIRE(*client->read(fd, p, buf) == PageRead::kData);
    CHECK(buf == page_pattern(1024, p, kVersions));
  }
}

TEST_CASE("many threads on one client, on one file and on several") {
  TempDir dir;
  auto client = start(dir, 4);
  Fd shared = *client->open("shared", {.page_size = 4096, .create = true});
  constexpr int kThreads = 6;
  constexpr int kPagesEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto own = client->open("own" + std::to_string(t), {.page_size = 4096, .create = true});
      if (!own) { ++failures; return; }
      std::vector<Ticket> tickets;
      for (int i = 0; i < kPagesEach; ++i) {
        int64_t page = t * kPagesEach + i;  // each thread its own pages of `shared`
        auto a = client->write_request(shared, page, page_pattern(4096, page, 3));
        auto b = client->write_request(*own, i, page_pattern(4096, i, 100 + t));
        if (!a || !b) { ++failures; return; }
        tickets.push_back(*a);
        tickets.push_back(*b);
      }
      for (Ticket tk : tickets) if (!client->write_confirm(tk)) ++failures;
      if (!client->sync(*own)) ++failures;
      std::vector<std::byte> buf(4096);
      for (int i = 0; i < kPagesEach; ++i) {
        int64_t page = t * kPagesEach + i;
        auto r = client->read(shared, page, buf);
        if (!r || buf != page_pattern(4096, page, 3)) ++failures;
        r = client->read(*own, i, buf);
        if (!r || buf != page_pattern(4096, i, 100 + t)) ++failures;
      }
      if (!client->close(*own)) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK_OK(client->sync(shared));
  CHECK(client->status(shared)->pages == kThreads * kPagesEach);
}

TEST_CASE("tickets issued by one thread are confirmed by another") {
  TempDir dir;
  auto client = start(dir, 8);
  Fd fd = *client->open("f", {.page_size = 512, .create = true});
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < 64; ++p) tickets.push_back(*client->write_request(fd, p, page_pattern(512, p)));
  std::thread confirmer([&] {
    for (Ticket t : tickets) CHECK_OK(client->write_confirm(t));
  });
  confirmer.join();
  CHECK_OK(client->sync(fd));
  CHECK(client->status(fd)->pages == 64);
}

TEST_CASE("lowering the level at run time bounds new requests") {
  TempDir dir;
  auto client = start(dir, 16);
  Fd fd = *client->open("f", {.page_size = 512, .create = true});
  CHECK_OK(client->set_concurrency(fd, 1));
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < 50; ++p) {
    tickets.push_back(*client->write_request(fd, p, page_pattern(512, p)));
    CHECK(client->status(fd)->in_flight <= 1);
  }
  for (Ticket t : tickets) CHECK_OK(client->write_confirm(t));
}

TEST_CASE("close waits for requests in flight and reports nothing when they succeeded") {
  TempDir dir;
  auto client = start(dir, 32);
  Fd fd = *client->open("f", {.page_size = 8192, .create = true});
  for (int64_t p = 0; p < 100; ++p) REQUIRE_OK(client->write_request(fd, p, page_pattern(8192, p)));
  CHECK_OK(client->close(fd));  // the 100 tickets are dropped, their writes done
  Fd again = *client->open("f");
  CHECK(client->status(again)->pages == 100);
  std::vector<std::byte> buf(8192);
  REQUIRE(*client->read(again, 99, buf) == PageRead::kData);
  CHECK(buf == page_pattern(8192, 99));
}

TEST_CASE("closing a descriptor while another thread waits for its lock") {
  TempDir dir;
  auto client = start(dir, 4);
  Fd holder = *client->open("f", {.page_size = 512, .create = true});
  Fd waiter = *client->open("f");
  REQUIRE_OK(client->lock(holder, LockMode::kExclusive));
  std::thread t([&] {
    // Either outcome is fine; what matters is no crash and no hang.
    (void)client->lock(waiter, LockMode::kExclusive, LockWait::kBlock);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_OK(client->close(waiter));
  CHECK_OK(client->unlock(holder));  // lets the blocked call return
  t.join();
  // The waiter's file is closed now, so its lock is gone too.
  Fd again = *client->open("f");
  CHECK_OK(client->lock(again, LockMode::kExclusive, LockWait::kTry));
}

TEST_CASE("sync and status from several threads while writes stream in") {
  TempDir dir;
  auto client = start(dir, 8);
  Fd fd = *client->open("f", {.page_size = 512, .create = true});
  std::atomic<bool> stop{false};
  std::thread syncer([&] {
    for (int i = 0; i < 200 && !stop; ++i) {
      CHECK_OK(client->sync(fd));
      CHECK_OK(client->status(fd));
    }
  });
  for (int64_t p = 0; p < 500; ++p) CHECK_OK(client->write(fd, p, page_pattern(512, p)));
  stop = true;
  syncer.join();
  CHECK_OK(client->sync(fd));
  CHECK(client->status(fd)->pages == 500);
}
