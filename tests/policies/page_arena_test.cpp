// The buffer pool's page arena: buffers that do not overlap and keep their
// bytes, chunks sized by the pool, aligned for huge pages when they are 2 MiB,
// reused, and unmapped once empty (memory follows what the pool holds).
#include <algorithm>
#include <cstring>
#include <vector>

#include "policies/buffer_pool.h"
#include "policies/page_arena.h"
#include "pagefile/policy.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;

namespace {

constexpr size_t kChunk = PageArena::kChunkBytes;

void stamp(const PageArena::Buffer& b, int seed) {
  for (uint32_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
}
bool stamped(const PageArena::Buffer& b, int seed) {
  for (uint32_t i = 0; i < b.size(); ++i) {
    if (b.data()[i] != static_cast<std::byte>((i * 31 + seed) & 0xff)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("arena buffers do not overlap and keep their bytes across chunks") {
  // 600 buffers of 8 KiB: three chunks of 2 MiB (256 buffers each).
  PageArena arena(1000);
  std::vector<PageArena::Buffer> held;
  for (int i = 0; i < 600; ++i) {
    held.push_back(arena.take(8192));
    REQUIRE(held.back());
    CHECK(held.back().size() == 8192u);
    stamp(held.back(), i);
  }
  CHECK(arena.mapped_bytes() == 3 * kChunk);
  std::vector<std::byte*> starts;
  for (auto& b : held) starts.push_back(b.data());
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) CHECK(starts[i] - starts[i - 1] >= 8192);
  for (int i = 0; i < 600; ++i) CHECK(stamped(held[i], i));
  // Each full chunk starts on a 2 MiB boundary, where a huge page can back it.
  size_t aligned = 0;
  for (auto* at : starts) aligned += reinterpret_cast<uintptr_t>(at) % kChunk == 0 ? 1 : 0;
  CHECK(aligned == 3);
}

TEST_CASE("a buffer given back is the next one taken of its size; other sizes have chunks of their own") {
  PageArena arena(1000);
  PageArena::Buffer a = arena.take(4096);
  PageArena::Buffer b = arena.take(4096);
  std::byte* at = a.data();
  a.reset();
  CHECK_FALSE(a);
  PageArena::Buffer c = arena.take(4096);
  CHECK(c.data() == at);
  PageArena::Buffer big = arena.take(65536);
  CHECK(arena.mapped_bytes() == 2 * kChunk);
  CHECK((big.data() + 65536 <= b.data() || b.data() + 4096 <= big.data()));
  // A move hands the buffer over; the moved-from one gives nothing back.
  PageArena::Buffer moved = std::move(c);
  CHECK(moved.data() == at);
  CHECK_FALSE(c);
}

TEST_CASE("a small pool's chunk is its own size, not a huge page") {
  PageArena arena(3);  // 3 pages of 4 KiB: 12 KiB
  std::vector<PageArena::Buffer> held;
  for (int i = 0; i < 3; ++i) held.push_back(arena.take(4096));
  CHECK(arena.mapped_bytes() == 3 * 4096);
  // A fourth (past what the owner said it holds) takes a chunk more, not a fault.
  held.push_back(arena.take(4096));
  CHECK(arena.mapped_bytes() == 6 * 4096);
  stamp(held[3], 3);
  CHECK(stamped(held[3], 3));
}

TEST_CASE("a buffer larger than a chunk gets a chunk of its own") {
  PageArena arena(4);
  PageArena::Buffer big = arena.take(3 * 1024 * 1024);
  PageArena::Buffer other = arena.take(3 * 1024 * 1024);
  CHECK(arena.mapped_bytes() == 2 * size_t{3 * 1024 * 1024});
  stamp(big, 1);
  stamp(other, 2);
  CHECK(stamped(big, 1));
  CHECK(stamped(other, 2));
}

TEST_CASE("a chunk whose buffers all came back is unmapped, but the last with room stays") {
  PageArena arena(1000);
  std::vector<PageArena::Buffer> first, second;
  for (int i = 0; i < 256; ++i) first.push_back(arena.take(8192));  // fills chunk 1
  for (int i = 0; i < 10; ++i) second.push_back(arena.take(8192));  // chunk 2
  CHECK(arena.mapped_bytes() == 2 * kChunk);
  first.clear();  // chunk 1 empties while chunk 2 has room: it goes
  CHECK(arena.mapped_bytes() == kChunk);
  second.clear();  // chunk 2 empties, the last of its size: kept for the next take
  CHECK(arena.mapped_bytes() == kChunk);
  PageArena::Buffer again = arena.take(8192);
  CHECK(arena.mapped_bytes() == kChunk);
}

TEST_CASE("a full pool that churns through two page sizes keeps memory near what it holds") {
  // 512 pages of 8 KiB = 4 MiB, then the same pool full of 4 KiB pages, and
  // back: without unmapping, both sizes' chunks would stay.
  BufferPool pool(512);
  auto registry = PolicyRegistry::with_builtins();
  std::vector<std::byte> page8(8192), page4(4096), out8(8192);
  for (int round = 0; round < 3; ++round) {
    auto made = registry->make("random", PolicyLimits{});
    REQUIRE_OK(made);
    pool.add_file(1, 8192, PolicyLimits{}, std::move(*made));
    for (int64_t p = 0; p < 2000; ++p) {
      std::memset(page8.data(), static_cast<int>(p & 0xff), page8.size());
      pool.fill(1, p, page8);
    }
    CHECK(pool.size() == 512u);
    // The pages held are the ones written: none read back as another's.
    int hits = 0;
    for (int64_t p = 0; p < 2000; ++p) {
      if (!pool.read(1, p, out8)) continue;
      ++hits;
      CHECK(out8[0] == static_cast<std::byte>(p & 0xff));
      CHECK(out8[8191] == static_cast<std::byte>(p & 0xff));
    }
    CHECK(hits == 512);
    CHECK(pool.mapped_bytes() <= 512 * 8192 + 2 * kChunk);
    pool.remove_file(1);
    made = registry->make("random", PolicyLimits{});
    REQUIRE_OK(made);
    pool.add_file(2, 4096, PolicyLimits{}, std::move(*made));
    for (int64_t p = 0; p < 2000; ++p) pool.fill(2, p, page4);
    CHECK(pool.size() == 512u);
    // What it holds, and at most one chunk more for each size.
    CHECK(pool.mapped_bytes() <= 512 * 4096 + 2 * kChunk);
    pool.remove_file(2);
    CHECK(pool.size() == 0u);
    CHECK(pool.mapped_bytes() <= 2 * kChunk);
  }
}
