// Frames: how messages cross a connection (doc/wire_protocol.md).
//
// On a byte stream a frame is a 4-byte little-endian length N followed by N
// bytes holding one Cap'n Proto message in its flat-array form. N is a
// multiple of 8 (Cap'n Proto words) and at most kMaxFrameBytes; anything else
// is malformed and closes the connection. In process (inproc:) the same
// frames are handed over in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <capnp/common.h>

namespace pagefile::net {

// Large enough for a run of 64 pages of 64 KiB plus headers.
inline constexpr size_t kMaxFrameBytes = 8u << 20;
inline constexpr size_t kFrameHeaderBytes = 4;

namespace internal {
// Memory for frames (wire/frame_memory.cpp): the block of a large frame
// the calling thread let go last serves its next frame of the same size.
void* allocate_frame_bytes(size_t bytes);
void free_frame_bytes(void* data, size_t bytes) noexcept;
// Whether blocks are kept at all (not under AddressSanitizer).
bool frame_blocks_kept() noexcept;
// What the calling thread holds for its next frames: at most 8 blocks.
struct FrameBlocksHeld {
  size_t blocks = 0;
  size_t bytes = 0;
};
FrameBlocksHeld frame_blocks_held() noexcept;
}  // namespace internal

// One message body, word-aligned so Cap'n Proto reads it in place.
// Allocates frame words without zeroing them: a frame read from a socket is
// overwritten at once, and zeroing 8 KiB per page read is measurable. Code
// that needs zeros (a capnp builder's segments) zeroes them itself.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(internal::allocate_frame_bytes(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { internal::free_frame_bytes(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;  // default-, not value-initialized
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 1 && (std::is_same_v<std::remove_cvref_t<Args>, U> && ...)) {
      // A word moved as the vector grows: capnp::word may not be copied
      // (KJ_DISALLOW_COPY), but it is eight bytes and nothing else.
      static_assert(std::is_trivially_destructible_v<U>);
      (std::memcpy(static_cast<void*>(p), static_cast<const void*>(&args), sizeof(U)), ...);
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
};

using Frame = std::vector<capnp::word, UninitializedAllocator<capnp::word>>;

// A frame of `words` zeroed words.
inline Frame zeroed_frame(size_t words) {
  Frame frame(words);
  std::memset(static_cast<void*>(frame.data()), 0, words * sizeof(capnp::word));
  return frame;
}

}  // namespace pagefile::net
