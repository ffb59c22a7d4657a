// Page buffers for a buffer pool, cut from large mappings that the kernel
// may back with huge pages.
//
// Why: a page server's pool holds hundreds of megabytes of pages, and its
// hits fall anywhere in them. Each page in a buffer of its own on the heap
// lies in 4 KiB pages of memory, so nearly every hit misses the TLB and walks
// the page tables before its copy starts. Here a pool's pages of one size lie
// side by side in chunks of 2 MiB, aligned and marked MADV_HUGEPAGE, which
// the kernel backs with one huge page each where it can: the TLB then covers
// a pool of gigabytes. Where it cannot (transparent huge pages off or
// "never"), the chunks are ordinary memory and nothing else changes.
//
// Chunks. Each page size has chunks of its own. A chunk is 2 MiB when the
// pool may hold that much of the size (`max_pages` times the size); a
// smaller pool gets one chunk of just its size, so that a pool of a few
// pages does not commit a huge page. A buffer given back is reused by the
// next take of its size; a chunk whose buffers are all back is unmapped
// unless it is then the only one of its size with room, so memory follows
// what the pool holds, page size by page size.
//
// Checking. Under AddressSanitizer the buffers that are not taken are
// poisoned: a use after give-back is reported as on the heap.
//
// Thread-safety: none; the owner (BufferPool) calls it under its own lock,
// destructor of a Buffer included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace pagefile {

class PageArena {
 public:
  // The chunk size of a pool whose pages of one size may fill it: one huge
  // page of x86-64 and arm64 (with 4 KiB base pages).
  static constexpr size_t kChunkBytes = size_t{2} << 20;

  // `max_pages`: the most buffers of one size the owner holds at once (a
  // pool's capacity), which sizes the chunks. REQUIRES: max_pages > 0.
  explicit PageArena(uint32_t max_pages);
  // Unmaps every chunk. REQUIRES: every Buffer has been destroyed.
  ~PageArena();
  PageArena(const PageArena&) = delete;
  PageArena& operator=(const PageArena&) = delete;

  // A taken buffer; goes back to its arena when destroyed.
  class Buffer {
   public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept { *this = std::move(other); }
    Buffer& operator=(Buffer&& other) noexcept;
    ~Buffer() { reset(); }

    std::byte* data() const { return data_; }
    uint32_t size() const { return size_; }
    explicit operator bool() const { return data_ != nullptr; }
    // Gives the buffer back now (a no-op when empty).
    void reset();

   private:
    friend class PageArena;
    PageArena* arena_ = nullptr;
    std::byte* data_ = nullptr;
    uint32_t size_ = 0;
  };

  // A buffer of `size` bytes, its contents undefined. Throws std::bad_alloc
  // when no memory can be mapped. A size above kChunkBytes gets a chunk of
  // its own (pages are at most kMaxPageSize; this only keeps the arena
  // right for any size). REQUIRES: size > 0.
  Buffer take(uint32_t size);

  // Bytes mapped now, all chunks together.
  size_t mapped_bytes() const { return mapped_bytes_; }

 private:
  struct Chunk {
    std::byte* base = nullptr;
    size_t bytes = 0;
    uint32_t slot = 0;     // bytes per buffer
    uint32_t slots = 0;    // buffers it holds
    uint32_t carved = 0;   // buffers handed out at least once: [0, carved)
    uint32_t used = 0;     // handed out now
    std::vector<std::byte*> free;  // given back, for reuse before carving
  };
  void give_back(std::byte* data, uint32_t size);
  // A new chunk for buffers of `size` bytes. Throws std::bad_alloc.
  Chunk* map_chunk(uint32_t size);
  void unmap_chunk(Chunk* chunk);
  size_t chunk_bytes(uint32_t size) const;

  const uint32_t max_pages_;
  size_t mapped_bytes_ = 0;
  // Every chunk by the address of its first byte: a buffer's chunk is the
  // last one that starts at or below it.
  std::map<uintptr_t, std::unique_ptr<Chunk>> chunks_;
  // By buffer size: the chunks with a buffer to spare (used < slots), the
  // newest last.
  std::map<uint32_t, std::vector<Chunk*>> open_;
};

}  // namespace pagefile
