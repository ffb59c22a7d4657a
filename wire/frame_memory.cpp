#include "wire/frame.h"

#include <new>

#include "core/sanitizers.h"

namespace pagefile::net::internal {

namespace {

// The blocks of large frames this thread let go, most recent last: a
// client reads one page answer after another, a server writes one after
// another, all of one size, and each went through malloc's bins (8 KiB is
// beyond its per-thread cache) and came back as whatever block the bins
// held, cold. Here the block just let go, still in the CPU's cache, serves
// the next frame of its size. Bounded: a few blocks of at most kMaxBytes.
struct BlockCache {
  static constexpr size_t kBlocks = 8;
  static constexpr size_t kMinBytes = 4096;       // below: malloc's own cache serves
  static constexpr size_t kMaxBytes = 128 << 10;  // above: rare, and too much to hold
  struct Block {
    void* data;
    size_t bytes;
  };
  Block blocks[kBlocks];
  size_t count;
  bool closed;  // the thread is ending: blocks go straight back to malloc
};

// Trivially destructible, so a frame freed by a destructor that runs after
// the thread's cleanup (a static's, at exit) still finds it, closed.
thread_local BlockCache cache{};

// Gives the cached blocks back when the thread ends.
struct BlockCacheCloser {
  ~BlockCacheCloser() {
    cache.closed = true;
    for (size_t i = 0; i < cache.count; ++i) ::operator delete(cache.blocks[i].data);
    cache.count = 0;
  }
};

bool cached_size(size_t bytes) {
  return frame_blocks_kept() && bytes >= BlockCache::kMinBytes && bytes <= BlockCache::kMaxBytes;
}

// Takes the i-th block out of the cache, the later ones moving down.
void* take_block(size_t i) {
  void* data = cache.blocks[i].data;
  for (size_t j = i + 1; j < cache.count; ++j) cache.blocks[j - 1] = cache.blocks[j];
  --cache.count;
  return data;
}

}  // namespace

bool frame_blocks_kept() noexcept {
  // Under AddressSanitizer every block goes back to malloc, so a use after
  // free of a frame is still caught.
  return !kAddressSanitizer;
}

void* allocate_frame_bytes(size_t bytes) {
  if (cached_size(bytes)) {
    for (size_t i = cache.count; i-- > 0;) {
      if (cache.blocks[i].bytes == bytes) return take_block(i);
    }
  }
  return ::operator new(bytes);
}

void free_frame_bytes(void* data, size_t bytes) noexcept {
  if (!cached_size(bytes) || cache.closed) {
    ::operator delete(data);
    return;
  }
  static thread_local BlockCacheCloser closer;  // registered by the thread's first cached block
  (void)closer;
  if (cache.count == BlockCache::kBlocks) {
    // Full: the oldest goes, so a change of page size is followed.
    ::operator delete(take_block(0));
  }
  cache.blocks[cache.count++] = {data, bytes};
}

FrameBlocksHeld frame_blocks_held() noexcept {
  FrameBlocksHeld held;
  for (size_t i = 0; i < cache.count; ++i) {
    ++held.blocks;
    held.bytes += cache.blocks[i].bytes;
  }
  return held;
}

}  // namespace pagefile::net::internal
