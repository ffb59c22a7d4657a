// WorkPool (core/work_pool.h): threads start only when work needs them, up
// to the maximum, and every task posted before join() runs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/work_pool.h"

namespace pagefile {
namespace {

// A gate tasks wait at until the test opens it (bounded: 10 s).
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Waits (at most 10 s) until `done` reaches `want`.
template <class F>
bool eventually(F&& condition) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}
bool reaches(const std::atomic<int>& done, int want) {
  return eventually([&] { return done.load() >= want; });
}

TEST_CASE("no thread until the first task; tasks one after another share one") {
  std::atomic<int> done{0};
  WorkPool pool(8);
  CHECK(pool.threads() == 0);
  for (int i = 1; i <= 20; ++i) {
    pool.post([&] { done.fetch_add(1); });
    REQUIRE(reaches(done, i));
    REQUIRE(eventually([&] { return pool.idle() == 1; }));  // waiting for the next
  }
  CHECK(pool.threads() == 1);
}

TEST_CASE("tasks that block at once get a thread each, up to the maximum; the rest wait their turn") {
  // (Declared before the pool, which joins first when a check fails.)
  Gate gate;
  std::atomic<int> started{0};
  std::atomic<int> done{0};
  WorkPool pool(3);
  for (int i = 0; i < 5; ++i) {
    pool.post([&] {
      started.fetch_add(1);
      gate.wait();
      done.fetch_add(1);
    });
  }
  REQUIRE(reaches(started, 3));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(started.load() == 3);  // the other two wait for a thread
  CHECK(pool.threads() == 3);
  gate.open();
  REQUIRE(reaches(done, 5));
  CHECK(pool.threads() == 3);
}

TEST_CASE("join runs what was posted, and what tasks post meanwhile, then nothing more") {
  Gate gate;
  std::atomic<int> done{0};
  WorkPool pool(2);
  pool.post([&] {
    gate.wait();
    done.fetch_add(1);
    // Posted while join() waits: it runs too (a request's next one, as
    // the client dispatches it from a completion).
    pool.post([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      done.fetch_add(1);
    });
  });
  for (int i = 0; i < 10; ++i) pool.post([&] { done.fetch_add(1); });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open();
  });
  pool.join();
  opener.join();
  CHECK(done.load() == 12);
  pool.post([&] { done.fetch_add(1); });
  pool.join();  // (again: nothing to do)
  CHECK(done.load() == 12);
  CHECK(pool.threads() == 2);
}

}  // namespace
}  // namespace pagefile
