// The client's end of the bus against a real pagefiled on loopback: answers
// read by the threads that wait for them (BusClient::read_as_waiter, call_sync), and
// by the bus itself when nobody waits. Every wait is bounded in time.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "bus/bus_client.h"
#include "tests/support/cluster.h"

using namespace pagefile;
using namespace pagefile::net;
using namespace pagefile::test;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<BusClient> start_bus(const std::string& spec, const TempDir& dir) {
  auto config = parse_bus(spec, dir / "home");
  REQUIRE_OK(config);
  auto bus = BusClient::start(*config);
  REQUIRE_OK(bus);
  return std::move(*bus);
}

// One pagefiled on loopback, started with `args`, and a bus to it.
struct OneServer {
  explicit OneServer(std::vector<std::string> args = {}) : cluster(1, std::move(args)) {}
  PagefiledCluster cluster;
  ServerProcess& server = cluster.server(0);
  std::unique_ptr<BusClient> bus = start_bus(server.address(), cluster.dir());
};

// Its disk slow (a second a request, one arm) and no cache: every read
// waits, long enough that a kill 50 ms after the reads went lands while they
// are outstanding even on a loaded machine.
struct SlowServer : OneServer {
  SlowServer() : OneServer({"--disk-latency", "1000", "--cache-pages", "0"}) {}
};

constexpr uint32_t kPageSize = 1024;

void build_write(wire::Request::Builder r, int64_t page, const std::vector<std::byte>& data) {
  auto write = r.initWrite();
  write.getShare().setFileId(9);
  write.getShare().setPageSize(kPageSize);
  write.setPage(page);
  write.setData(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
}

void build_read(wire::Request::Builder r, int64_t page) {
  auto read = r.initRead();
  read.getShare().setFileId(9);
  read.getShare().setPageSize(kPageSize);
  read.setPage(page);
  read.setCount(1);
}

}  // namespace

TEST_CASE_FIXTURE(OneServer, "an answer nobody waits for is read by the bus itself, promptly") {
  for (int i = 0; i < 20; ++i) {
    std::promise<std::thread::id> answered;
    auto future = answered.get_future();
    bus->call(server.address(), [](wire::Request::Builder r) { r.setPing(); },
              [&answered](Result<ReplyPtr> reply) {
                CHECK_OK(reply);
                answered.set_value(std::this_thread::get_id());
              });
    // No read_as_waiter() here: the bus's sweeper reads it.
    REQUIRE(future.wait_for(5s) == std::future_status::ready);
    CHECK(future.get() != std::this_thread::get_id());
  }
}

TEST_CASE_FIXTURE(OneServer, "threads waiting on one connection each get their own answer") {
  constexpr int kThreads = 6;
  constexpr int kPagesEach = 150;
  std::atomic<int> mismatches{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPagesEach; ++i) {
        const int64_t page = t * kPagesEach + i;
        const auto data = page_pattern(kPageSize, page, 77);
        auto written = bus->call_sync(server.address(), [&](wire::Request::Builder r) { build_write(r, page, data); });
        if (!written) {
          ++errors;
          continue;
        }
        auto read = bus->call_sync(server.address(), [&](wire::Request::Builder r) { build_read(r, page); });
        if (!read || !(*read)->root().isPages() || (*read)->root().getPages().size() != kPageSize) {
          ++errors;
          continue;
        }
        if (std::memcmp((*read)->root().getPages().begin(), data.data(), kPageSize) != 0) ++mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(errors.load() == 0);
  CHECK(mismatches.load() == 0);
}

TEST_CASE_FIXTURE(OneServer, "read_as_waiter() delivers every answer that arrives, whoever asked, and returns when the time is up") {
  constexpr int kCalls = 64;
  std::atomic<int> answered{0};
  for (int i = 0; i < kCalls; ++i) {
    bus->call(server.address(), [](wire::Request::Builder r) { r.setPing(); },
              [&answered](Result<ReplyPtr> reply) {
                CHECK_OK(reply);
                ++answered;
              });
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (answered.load() < kCalls && std::chrono::steady_clock::now() < deadline) bus->read_as_waiter(server.address());
  CHECK(answered.load() == kCalls);
  // Nothing outstanding: read_as_waiter waits its time out and returns.
  const auto before = std::chrono::steady_clock::now();
  bus->read_as_waiter(server.address(), 30ms);
  CHECK(std::chrono::steady_clock::now() - before >= 30ms);
}

TEST_CASE_FIXTURE(SlowServer, "a server killed while a thread reads its answers: every wait ends with kDisconnected") {
  for (int64_t page = 0; page < 4; ++page) {
    const auto data = page_pattern(kPageSize, page, 5);
    REQUIRE_OK(bus->call_sync(server.address(), [&](wire::Request::Builder r) { build_write(r, page, data); }));
  }
  // Reads that each wait a second for the emulated disk (one arm, no cache):
  // the kill lands while they are outstanding and threads sit in call_sync
  // reading.
  std::vector<std::future<Result<ReplyPtr>>> reads;
  for (int64_t page = 0; page < 4; ++page) {
    reads.push_back(std::async(std::launch::async, [&, page] {
      return bus->call_sync(server.address(), [&](wire::Request::Builder r) { build_read(r, page); });
    }));
  }
  std::this_thread::sleep_for(50ms);
  server.kill();
  for (auto& read : reads) {
    REQUIRE(read.wait_for(10s) == std::future_status::ready);
    CHECK_CODE(read.get(), Code::kDisconnected);
  }
}
