#include "policies/page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <new>
#include <utility>

#include "core/sanitizers.h"

#if PAGEFILE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(at, bytes) ASAN_POISON_MEMORY_REGION(at, bytes)
#define UNPOISON(at, bytes) ASAN_UNPOISON_MEMORY_REGION(at, bytes)
#else
#define POISON(at, bytes) ((void)(at), (void)(bytes))
#define UNPOISON(at, bytes) ((void)(at), (void)(bytes))
#endif

namespace pagefile {

PageArena::PageArena(uint32_t max_pages) : max_pages_(max_pages) { assert(max_pages > 0); }

PageArena::~PageArena() {
  for (auto& [at, chunk] : chunks_) {
    UNPOISON(chunk->base, chunk->bytes);  // the mapping's next user is not ours
    ::munmap(chunk->base, chunk->bytes);
  }
}

PageArena::Buffer& PageArena::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    arena_ = std::exchange(other.arena_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PageArena::Buffer::reset() {
  if (data_ == nullptr) return;
  arena_->give_back(data_, size_);
  arena_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

size_t PageArena::chunk_bytes(uint32_t size) const {
  const size_t wanted = size_t{max_pages_} * size;
  if (wanted >= kChunkBytes && size <= kChunkBytes) return kChunkBytes;
  // A small pool's pages, or a buffer larger than a chunk (one a chunk).
  const size_t bytes = std::min(wanted, std::max<size_t>(size, kChunkBytes));
  const size_t system_page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + system_page - 1) / system_page * system_page;
}

PageArena::Chunk* PageArena::map_chunk(uint32_t size) {
  const size_t bytes = chunk_bytes(size);
  std::byte* base = nullptr;
  if (bytes == kChunkBytes) {
    // A huge page needs an aligned range: map twice the size and cut off
    // what lies outside the aligned chunk.
    void* at = ::mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) throw std::bad_alloc();
    auto start = reinterpret_cast<uintptr_t>(at);
    uintptr_t aligned = (start + bytes - 1) & ~(uintptr_t{bytes} - 1);
    if (aligned > start) ::munmap(at, aligned - start);
    if (uintptr_t end = start + 2 * bytes; end > aligned + bytes) {
      ::munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
    }
    base = reinterpret_cast<std::byte*>(aligned);
    // Only a hint: without transparent huge pages the chunk stays in small ones.
    (void)::madvise(base, bytes, MADV_HUGEPAGE);
  } else {
    void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) throw std::bad_alloc();
    base = static_cast<std::byte*>(at);
  }
  POISON(base, bytes);
  auto chunk = std::make_unique<Chunk>();
  chunk->base = base;
  chunk->bytes = bytes;
  chunk->slot = size;
  chunk->slots = static_cast<uint32_t>(bytes / size);
  Chunk* made = chunk.get();
  chunks_.emplace(reinterpret_cast<uintptr_t>(base), std::move(chunk));
  mapped_bytes_ += bytes;
  return made;
}

void PageArena::unmap_chunk(Chunk* chunk) {
  UNPOISON(chunk->base, chunk->bytes);
  ::munmap(chunk->base, chunk->bytes);
  mapped_bytes_ -= chunk->bytes;
  chunks_.erase(reinterpret_cast<uintptr_t>(chunk->base));
}

PageArena::Buffer PageArena::take(uint32_t size) {
  assert(size > 0);
  std::vector<Chunk*>& open = open_[size];
  if (open.empty()) open.push_back(map_chunk(size));
  Chunk* chunk = open.back();
  std::byte* data = nullptr;
  if (!chunk->free.empty()) {
    data = chunk->free.back();
    chunk->free.pop_back();
  } else {
    data = chunk->base + size_t{chunk->carved++} * size;
  }
  if (++chunk->used == chunk->slots) open.pop_back();  // full: no room to offer
  UNPOISON(data, size);
  Buffer buffer;
  buffer.arena_ = this;
  buffer.data_ = data;
  buffer.size_ = size;
  return buffer;
}

void PageArena::give_back(std::byte* data, uint32_t size) {
  auto it = chunks_.upper_bound(reinterpret_cast<uintptr_t>(data));
  assert(it != chunks_.begin());
  Chunk* chunk = std::prev(it)->second.get();
  assert(chunk->slot == size && data < chunk->base + chunk->bytes);
  POISON(data, size);
  chunk->free.push_back(data);
  std::vector<Chunk*>& open = open_[size];
  if (chunk->used-- == chunk->slots) open.push_back(chunk);  // was full: has room again
  // An empty chunk goes unless it is the last with room for its size: a pool
  // that gives one back and takes one (every admit of a full pool) keeps it.
  if (chunk->used == 0 && open.size() > 1) {
    open.erase(std::find(open.begin(), open.end(), chunk));
    unmap_chunk(chunk);
  }
}

}  // namespace pagefile
