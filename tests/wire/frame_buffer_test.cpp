// The buffer that cuts a byte stream into frames holds what its connection
// needs: little while idle, more while busy, a large frame only while it
// is there; and every frame comes out whole and in order whatever the
// reads' sizes.
#include "wire/frame_buffer.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

using namespace pagefile::net;

namespace {

// Frames of `words` words each, numbered from `first`, as they go on the wire.
std::vector<uint8_t> stream_of(size_t count, size_t words, uint64_t first) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < count; ++i) {
    FrameHeader header = encode_frame_length(static_cast<uint32_t>(words * 8));
    out.insert(out.end(), header.begin(), header.end());
    for (size_t w = 0; w < words; ++w) {
      uint64_t value = first + i;
      const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
      out.insert(out.end(), bytes, bytes + 8);
    }
  }
  return out;
}

// Feeds `bytes` in reads of at most `chunk` bytes; the frames' numbers.
std::vector<uint64_t> feed(FrameBuffer& buffer, const std::vector<uint8_t>& bytes, size_t chunk) {
  std::vector<uint64_t> seen;
  size_t at = 0;
  Frame frame;
  std::string problem;
  while (at < bytes.size()) {
    std::span<uint8_t> space = buffer.space();
    REQUIRE(!space.empty());
    size_t n = std::min({space.size(), chunk, bytes.size() - at});
    std::memcpy(space.data(), bytes.data() + at, n);
    buffer.filled(n);
    at += n;
    for (;;) {
      FrameBuffer::Next next = buffer.next(frame, problem);
      REQUIRE(next != FrameBuffer::Next::kMalformed);
      if (next == FrameBuffer::Next::kMore) break;
      uint64_t number = 0;
      std::memcpy(&number, frame.data(), 8);
      seen.push_back(number);
    }
  }
  return seen;
}

std::vector<uint64_t> numbers(uint64_t first, size_t count) {
  std::vector<uint64_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = first + i;
  return out;
}

}  // namespace

TEST_CASE("a frame buffer starts small, grows while reads fill it, and holds a large frame only while it is there") {
  FrameBuffer buffer;
  CHECK(buffer.capacity() == FrameBuffer::kIdleBytes);
  // A few small requests, read as they come: it stays small.
  CHECK(feed(buffer, stream_of(3, 12, 1), 200) == numbers(1, 3));
  CHECK(buffer.capacity() == FrameBuffer::kIdleBytes);
  // A burst that fills every read: it doubles up to the busy size, no more.
  CHECK(feed(buffer, stream_of(2000, 12, 100), 1 << 20) == numbers(100, 2000));
  CHECK(buffer.capacity() == FrameBuffer::kBusyBytes);
  // A frame larger than that: the buffer grows to hold it, and back once
  // it is gone.
  const size_t large_words = FrameBuffer::kBusyBytes / 8 * 3;
  CHECK(feed(buffer, stream_of(1, large_words, 7), 1 << 20) == numbers(7, 1));
  buffer.shrink_when_empty();
  CHECK(buffer.capacity() == FrameBuffer::kBusyBytes);
  // Frames split across reads at every odd size come out whole.
  CHECK(feed(buffer, stream_of(300, 130, 5000), 997) == numbers(5000, 300));
}
