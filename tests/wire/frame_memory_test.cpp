// Frame memory: a large frame's block, let go, serves the thread's next
// frame of its size (warm in the CPU's cache, and no trip through malloc's
// bins); the blocks held are few, follow a change of size, and never hand
// one block to two live frames.
#include "wire/frame.h"

#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

using namespace pagefile::net;
using pagefile::net::internal::frame_blocks_held;

namespace {

// A page answer's frame: one 8 KiB page and a few words around it.
constexpr size_t kAnswerWords = 8192 / 8 + 6;
constexpr size_t kAnswerBytes = kAnswerWords * 8;

Frame filled(size_t words, uint8_t byte) {
  Frame f(words);
  std::memset(static_cast<void*>(f.data()), byte, words * 8);
  return f;
}

bool all_bytes(const Frame& f, uint8_t byte) {
  const auto* p = reinterpret_cast<const uint8_t*>(f.data());
  for (size_t i = 0; i < f.size() * 8; ++i) {
    if (p[i] != byte) return false;
  }
  return true;
}

// Makes `count` live frames of `words` words, the i-th filled with
// first + i, and checks that each has a block of its own and its bytes.
void check_live_frames(size_t count, size_t words, uint8_t first) {
  std::vector<Frame> live;
  for (size_t i = 0; i < count; ++i) live.push_back(filled(words, static_cast<uint8_t>(first + i)));
  std::set<const void*> blocks;
  for (const Frame& f : live) blocks.insert(f.data());
  CHECK(blocks.size() == live.size());
  for (size_t i = 0; i < count; ++i) CHECK(all_bytes(live[i], static_cast<uint8_t>(first + i)));
}

}  // namespace

TEST_CASE("frame memory: a large frame's block serves the next frame of its size on the thread") {
  if (!pagefile::net::internal::frame_blocks_kept()) {
    // (Under AddressSanitizer every block goes back to malloc.)
    { Frame a = filled(kAnswerWords, 1); }
    CHECK(frame_blocks_held().blocks == 0);
    return;
  }
  std::thread([] {  // a thread of its own: nothing held at the start
    REQUIRE(frame_blocks_held().blocks == 0);
    const void* first = nullptr;
    {
      Frame a = filled(kAnswerWords, 1);
      first = a.data();
    }
    CHECK(frame_blocks_held().blocks == 1);
    CHECK(frame_blocks_held().bytes == kAnswerBytes);
    Frame b = filled(kAnswerWords, 2);
    CHECK(static_cast<const void*>(b.data()) == first);
    CHECK(all_bytes(b, 2));
    CHECK(frame_blocks_held().blocks == 0);
    // Small frames and very large ones are malloc's alone.
    { Frame small(64); }
    { Frame huge(1 << 20); }
    CHECK(frame_blocks_held().blocks == 0);
  }).join();
}

TEST_CASE("frame memory: at most 8 blocks held, the oldest let go first, so a change of size is followed") {
  if (!pagefile::net::internal::frame_blocks_kept()) return;  // (above)
  std::thread([] {
    {
      std::vector<Frame> frames;
      for (int i = 0; i < 20; ++i) frames.push_back(filled(kAnswerWords, 3));
    }
    CHECK(frame_blocks_held().blocks == 8);
    CHECK(frame_blocks_held().bytes == 8 * kAnswerBytes);
    {
      std::vector<Frame> frames;
      for (int i = 0; i < 8; ++i) frames.push_back(filled(2 * kAnswerWords, 4));
      CHECK(frame_blocks_held().blocks == 8);  // none of this size was held
    }
    CHECK(frame_blocks_held().bytes == 8 * 2 * kAnswerBytes);  // all of the new size now
    std::vector<Frame> frames;
    for (int i = 0; i < 8; ++i) frames.push_back(filled(2 * kAnswerWords, static_cast<uint8_t>(10 + i)));
    CHECK(frame_blocks_held().blocks == 0);
    for (int i = 0; i < 8; ++i) CHECK(all_bytes(frames[static_cast<size_t>(i)], static_cast<uint8_t>(10 + i)));
  }).join();
}

TEST_CASE("frame memory: live frames never share a block, on one thread or across threads") {
  // Frames made on one thread, let go on another: each thread's blocks are
  // its own, and every frame holds its own bytes throughout.
  std::vector<Frame> made;
  for (int i = 0; i < 32; ++i) made.push_back(filled(kAnswerWords + static_cast<size_t>(i % 3), static_cast<uint8_t>(i)));
  std::thread other([&] {
    for (int round = 0; round < 50; ++round) {
      check_live_frames(12, kAnswerWords, 100);
      if (round == 25) made.clear();  // another thread's frames let go here
    }
    CHECK(frame_blocks_held().blocks <= 8);
  });
  other.join();
  check_live_frames(20, kAnswerWords, 200);
}
