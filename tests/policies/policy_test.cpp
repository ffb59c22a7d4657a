// The policies on reference strings with known answers, driven through the
// buffer pool alone (no I/O): every miss is filled with the page's pattern,
// every page fetched ahead is filled as the store would.
#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "policies/buffer_pool.h"
#include "pagefile/policy.h"
#include "tests/policies/clock_policy.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using pagefile::test::ClockPolicy;
using pagefile::test::page_pattern;

namespace {

constexpr uint32_t kPageSize = 512;

// A pool with the built-ins (and whatever a test adds) and helpers to run a
// reference string through it the way the client does.
struct PoolFixture {
  explicit PoolFixture(uint32_t capacity) : pool(capacity) {}

  void add(uint64_t file, std::string_view policy, PolicyLimits limits = {}) {
    auto made = registry->make(policy, limits);
    REQUIRE_OK(made);
    pool.add_file(file, kPageSize, limits, std::move(*made));
  }

  // One read by the program: true on a hit. Checks the bytes either way.
  bool access(uint64_t file, int64_t page) {
    std::vector<std::byte> buf(kPageSize);
    bool hit = pool.read(file, page, buf);
    if (hit) {
      CHECK(buf == page_pattern(kPageSize, page, file));
    } else {
      pool.fill(file, page, page_pattern(kPageSize, page, file));
    }
    for (int64_t ahead : pool.read_ahead(file, page)) {
      pool.fill_prefetched(file, ahead, page_pattern(kPageSize, ahead, file));
    }
    return hit;
  }

  // Hits over a reference string.
  int run(uint64_t file, const std::vector<int64_t>& string) {
    int hits = 0;
    for (int64_t page : string) hits += access(file, page) ? 1 : 0;
    return hits;
  }

  std::shared_ptr<PolicyRegistry> registry = PolicyRegistry::with_builtins();
  BufferPool pool;
};

std::vector<int64_t> loop_pass(int64_t pages) {
  std::vector<int64_t> out;
  for (int64_t p = 0; p < pages; ++p) out.push_back(p);
  return out;
}

}  // namespace

TEST_CASE("looping scan of N+1 pages through N frames: LRU hits nothing, looping N-1 or more a pass") {
  for (int64_t n : {4, 10, 32}) {
    INFO("N = " << n);
    PoolFixture fx(static_cast<uint32_t>(n));
    fx.add(1, "random");
    PoolFixture own(static_cast<uint32_t>(n));
    own.add(2, "looping");
    auto pass = loop_pass(n + 1);
    for (int round = 0; round < 5; ++round) {
      CHECK(fx.run(1, pass) == 0);  // LRU evicts each page just before it comes round
      // MRU: pass 1 misses all; after it, the page missed walks back one a
      // pass (N=4: pass 2 misses 3, pass 3 misses 2, pass 4 misses 1), so a
      // pass hits N, or N-1 when the walk wraps round (N=4, pass 5: 0, 4).
      int hits = own.run(2, pass);
      if (round == 0) {
        CHECK(hits == 0);
      } else {
        CHECK(hits >= n - 1);
        CHECK(hits <= n);
      }
    }
    // Worked by hand for N=4 above: 4 + 4 + 4 + 3 hits after the first pass.
    if (n == 4) CHECK(own.pool.counters(2).hits == 15);
  }
}

TEST_CASE("looping keeps the whole loop when it fits") {
  PoolFixture fx(16);
  fx.add(1, "looping");
  auto pass = loop_pass(12);
  CHECK(fx.run(1, pass) == 0);
  CHECK(fx.run(1, pass) == 12);
  CHECK(fx.run(1, pass) == 12);
  CHECK(fx.pool.counters(1).evictions == 0);
}

TEST_CASE("sequential scan holds at most the read-ahead window and uses what it fetched") {
  for (uint32_t window : {1u, 4u, 8u}) {
    INFO("window " << window);
    PoolFixture fx(64);
    fx.add(1, "sequential", {.read_ahead = window});
    int hits = 0;
    for (int64_t p = 0; p < 200; ++p) {
      hits += fx.access(1, p) ? 1 : 0;
      CHECK(fx.pool.counters(1).pages <= window);
    }
    FileCounters c = fx.pool.counters(1);
    CHECK(hits == 199);  // only page 0 misses: every later page was fetched ahead
    CHECK(c.misses == 1);
    CHECK(c.prefetch_used == 199);
    CHECK(c.prefetch_wasted == 0);
    CHECK(c.tossed == 200);
    CHECK(c.pages == window);  // the pages ahead of the last one read
    fx.pool.drop_all(1);
    CHECK(fx.pool.counters(1).prefetch_wasted == window);
  }
}

TEST_CASE("random string under random matches a straightforward LRU model exactly") {
  constexpr uint32_t kFrames = 16;
  PoolFixture fx(kFrames);
  fx.add(1, "random");
  std::mt19937 rng(7);
  // Skewed so both hits and misses are frequent.
  std::uniform_int_distribution<int64_t> hot(0, 19), cold(0, 199), coin(0, 3);
  std::deque<int64_t> model;  // most recent at the front
  int model_hits = 0, pool_hits = 0;
  for (int i = 0; i < 5000; ++i) {
    int64_t page = coin(rng) == 0 ? cold(rng) : hot(rng);
    auto it = std::find(model.begin(), model.end(), page);
    bool model_hit = it != model.end();
    if (model_hit) model.erase(it);
    model.push_front(page);
    if (model.size() > kFrames) model.pop_back();
    bool pool_hit = fx.access(1, page);
    REQUIRE(pool_hit == model_hit);
    model_hits += model_hit;
    pool_hits += pool_hit;
  }
  CHECK(pool_hits == model_hits);
  CHECK(model_hits > 1000);
  CHECK(model_hits < 4000);
  for (int64_t page : model) CHECK(fx.pool.contains(1, page));
  CHECK(fx.pool.counters(1).evictions == fx.pool.counters(1).misses - kFrames);
}

TEST_CASE("pinned pages are never evicted or tossed") {
  for (std::string_view policy : {"random", "looping", "sequential"}) {
    INFO(policy);
    PoolFixture fx(8);
    fx.add(1, policy, {.read_ahead = 4});
    for (int64_t p : {0, 1, 2}) fx.pool.pin(1, p);  // before they come in
    std::mt19937 rng(3);
    std::uniform_int_distribution<int64_t> any(0, 63);
    for (int64_t p = 0; p < 3; ++p) fx.access(1, p);
    for (int i = 0; i < 2000; ++i) {
      fx.access(1, any(rng));
      for (int64_t p = 0; p < 3; ++p) REQUIRE(fx.pool.contains(1, p));
    }
    for (int64_t p = 0; p < 3; ++p) CHECK(fx.access(1, p));  // hits, right bytes
    CHECK(fx.pool.counters(1).pinned == 3);
    CHECK_OK(fx.pool.unpin(1, 0));
    CHECK_CODE(fx.pool.unpin(1, 0), Code::kInvalidArgument);
    CHECK_CODE(fx.pool.unpin(1, 40), Code::kInvalidArgument);
  }
}

TEST_CASE("a full pool of pinned pages keeps nothing new and loses nothing") {
  PoolFixture fx(3);
  fx.add(1, "random");
  for (int64_t p = 0; p < 3; ++p) {
    fx.pool.pin(1, p);
    fx.access(1, p);
  }
  CHECK_FALSE(fx.access(1, 9));
  CHECK_FALSE(fx.pool.contains(1, 9));
  CHECK(fx.pool.size() == 3);
}

TEST_CASE("files share the pool within their min and max") {
  PoolFixture fx(20);
  fx.add(1, "random", {.min_pages = 6});
  fx.add(2, "random", {.max_pages = 5});
  fx.add(3, "random");
  fx.run(1, loop_pass(10));
  fx.run(2, loop_pass(10));
  CHECK(fx.pool.counters(2).pages == 5);  // its max
  fx.run(3, loop_pass(100));
  CHECK(fx.pool.size() == 20);
  CHECK(fx.pool.counters(1).pages == 6);  // another file never takes its minimum
  CHECK(fx.pool.counters(3).pages + fx.pool.counters(2).pages == 14);
  fx.pool.remove_file(3);
  CHECK(fx.pool.size() == 6 + fx.pool.counters(2).pages);
}

TEST_CASE("writes replace the pooled copy; truncate and drop remove pages") {
  PoolFixture fx(8);
  fx.add(1, "random");
  fx.run(1, loop_pass(6));
  fx.pool.write(1, 2, page_pattern(kPageSize, 2, 99));
  std::vector<std::byte> buf(kPageSize);
  REQUIRE(fx.pool.read(1, 2, buf));
  CHECK(buf == page_pattern(kPageSize, 2, 99));
  fx.pool.truncate(1, 4);
  CHECK(fx.pool.counters(1).pages == 4);
  CHECK_FALSE(fx.pool.contains(1, 4));
  CHECK_FALSE(fx.pool.contains(1, 5));
  fx.pool.drop(1, 0);
  CHECK_FALSE(fx.pool.contains(1, 0));
  fx.pool.drop_all(1);
  CHECK(fx.pool.size() == 0);
}

TEST_CASE("a custom policy (CLOCK) registers by name and runs like the built-ins") {
  PoolFixture fx(3);
  CHECK_OK(fx.registry->add("clock", [](const PolicyLimits&) { return std::make_unique<ClockPolicy>(); }));
  CHECK_CODE(fx.registry->add("clock", [](const PolicyLimits&) { return std::make_unique<ClockPolicy>(); }),
             Code::kAlreadyExists);
  CHECK_CODE(fx.registry->add("random", [](const PolicyLimits&) { return std::make_unique<ClockPolicy>(); }),
             Code::kAlreadyExists);
  CHECK_CODE(fx.registry->add("bad name", [](const PolicyLimits&) { return std::make_unique<ClockPolicy>(); }),
             Code::kInvalidArgument);
  CHECK_CODE(fx.registry->add("empty", PolicyMaker{}), Code::kInvalidArgument);
  CHECK_CODE(fx.registry->make("nosuch", {}), Code::kNotFound);
  CHECK(fx.registry->names() == std::vector<std::string>{"clock", "global-sequential", "looping", "random", "sequential"});

  // Worked by hand, 3 frames, string 0 1 2 0 3 1 4 0:
  //   CLOCK: 0 1 2 miss; 0 hit; 3 sweeps all bits clear, evicts 0; 1 hit;
  //          4 clears 1's bit, evicts 2; 0 clears 3's bit, evicts 1.
  //          2 hits, holds {3, 0, 4}.
  //   LRU:   0 1 2 miss; 0 hit; 3 evicts 1; 1 evicts 2; 4 evicts 0; 0 evicts 3.
  //          1 hit, holds {1, 4, 0}.
  std::vector<int64_t> string = {0, 1, 2, 0, 3, 1, 4, 0};
  fx.add(1, "clock");
  CHECK(fx.run(1, string) == 2);
  for (int64_t p : {3, 0, 4}) CHECK(fx.pool.contains(1, p));
  PoolFixture lru(3);
  lru.add(1, "random");
  CHECK(lru.run(1, string) == 1);
  for (int64_t p : {1, 4, 0}) CHECK(lru.pool.contains(1, p));
}

TEST_CASE("policy names") {
  CHECK(policy_name(BufferPolicy{}) == "random");
  CHECK(policy_name(BufferPolicy{.access = AccessType::kLooping}) == "looping");
  CHECK(policy_name(BufferPolicy{.access = AccessType::kLooping, .name = "clock"}) == "clock");
  CHECK_OK(check_buffer_policy({.name = "2q-custom.v1"}));
  CHECK_CODE(check_buffer_policy({.name = "a/b"}), Code::kInvalidArgument);
  CHECK_CODE(check_buffer_policy({.name = std::string(kMaxPolicyNameLength + 1, 'x')}), Code::kInvalidArgument);
}
