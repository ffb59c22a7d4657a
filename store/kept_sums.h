// A Pagefile's checksums in memory (store/local_pagefile.h): what it last
// wrote, verified or read from a checksum block for each unit (page or
// sector) of its file, so that reading a page back needs no read of its
// checksum entry, and no lock.
//
// Read and written without a lock, as every page read and write does: the
// values sit in chunks allocated on first use and never moved. The chunks
// double in size (512 slots, 512, 1024, ... up to the last), so that a file
// of a few pages, a journal made at each commit, allocates and zeroes 4 KiB
// where one chunk of 4096 slots took 32 KiB (3% of a small commit's user
// time), and a file of millions of pages has 14 chunks. Whole-page
// consistency is the caller's (a page's units are set and read under that
// page's lock).
//
// Two sizes: every unit up to kMaxUnits (a sole writer's, whose kept
// checksums are the file's: at most 32 MiB), or a bounded cache of
// kBoundedSlots units (a reader's, at most 2 MiB), where a unit takes the
// slot of the one kBoundedSlots away. A bounded slot holds its unit beside
// the value, and the two may be read torn between two set() calls: harmless
// for checksums seeded with their unit's number, which no other unit's
// bytes match.
//
// Thread-safety: get() and set() from many threads at once; forget_from()
// ordered against them by the caller (a truncate).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace pagefile {

class KeptSums {
 public:
  // Units past this are not kept (8 bytes each: at most 32 MiB).
  static constexpr size_t kMaxUnits = size_t{1} << 22;
  // Units a bounded one keeps at once (16 bytes each: at most 2 MiB).
  static constexpr size_t kBoundedSlots = size_t{1} << 17;

  explicit KeptSums(bool bounded = false) : bounded_(bounded) {}
  ~KeptSums() {
    for (auto& chunk : chunks_) delete[] chunk.load();
  }
  KeptSums(const KeptSums&) = delete;
  KeptSums& operator=(const KeptSums&) = delete;

  // The value kept for `unit`; 0 when none.
  uint64_t get(size_t unit) const {
    if (unit >= kMaxUnits) return 0;
    const std::atomic<uint64_t>* word = find(unit);
    if (!word) return 0;
    if (bounded_ && word[1].load(std::memory_order_relaxed) != unit + 1) return 0;
    return word[0].load(std::memory_order_relaxed);
  }

  // Starts loading `unit`'s slot into the cache. A page read or written
  // looks its checksum up after copying or hashing the page: asked for
  // first, the slot (out of the cache after a 4 KiB copy, a cache miss that
  // was most of a point read's cost of checking) arrives meanwhile.
  void prefetch(size_t unit) const {
    if (unit >= kMaxUnits) return;
    if (const std::atomic<uint64_t>* word = find(unit)) __builtin_prefetch(word);
  }

  // Keeps `value` for `unit` (0: forgets it); past kMaxUnits, nothing.
  void set(size_t unit, uint64_t value) {
    if (unit >= kMaxUnits) return;
    size_t at = slot(unit);
    const size_t c = chunk_of(at);
    std::atomic<uint64_t>* chunk = chunks_[c].load(std::memory_order_acquire);
    if (chunk == nullptr) {
      if (value == 0) return;
      auto fresh = std::make_unique<std::atomic<uint64_t>[]>(chunk_slots(c) * words_per_slot());  // (zeros)
      if (chunks_[c].compare_exchange_strong(chunk, fresh.get(), std::memory_order_acq_rel)) {
        chunk = fresh.release();
      }  // else `chunk` is the one another thread put there first
    }
    std::atomic<uint64_t>* word = words_of(chunk, at, c);
    if (bounded_) {
      if (value == 0 && word[1].load(std::memory_order_relaxed) != unit + 1) return;  // another unit's
      word[1].store(unit + 1, std::memory_order_relaxed);
    }
    word[0].store(value, std::memory_order_relaxed);
    size_t end = end_.load(std::memory_order_relaxed);
    while (unit >= end && !end_.compare_exchange_weak(end, unit + 1, std::memory_order_relaxed)) {
    }
  }

  // Forgets every value from `unit` on.
  void forget_from(size_t unit) {
    size_t end = end_.load();
    if (bounded_) {
      // (Each slot says its unit: every chunk allocated is looked through.)
      if (unit >= end) return;
      for (size_t c = 0; c < chunks_.size(); ++c) {
        std::atomic<uint64_t>* chunk = chunks_[c].load(std::memory_order_acquire);
        if (!chunk) continue;
        for (size_t s = 0; s < chunk_slots(c); ++s) {
          if (chunk[2 * s + 1].load(std::memory_order_relaxed) > unit) chunk[2 * s].store(0, std::memory_order_relaxed);
        }
      }
      end_ = unit;
      return;
    }
    for (size_t u = unit; u < end && u < kMaxUnits; ++u) {
      const size_t c = chunk_of(u);
      if (auto* chunk = chunks_[c].load(std::memory_order_acquire)) {
        chunk[u - chunk_start(c)].store(0, std::memory_order_relaxed);
      } else {
        u = chunk_start(c) + chunk_slots(c) - 1;  // (a chunk never allocated holds nothing)
      }
    }
    if (unit < end) end_ = unit;
  }

 private:
  // The first chunk's slots (4 KiB or 8 KiB, allocated and zeroed at its
  // first use: every open journal of a SQLite process has one).
  static constexpr size_t kFirstChunk = size_t{1} << 9;

  // The chunk that holds `slot`, the first slot of chunk `chunk`, and how
  // many it holds: chunk 0 holds [0, kFirstChunk), chunk c > 0 holds
  // [kFirstChunk 2^(c-1), kFirstChunk 2^c).
  static size_t chunk_of(size_t slot) { return static_cast<size_t>(std::bit_width(slot / kFirstChunk)); }
  static size_t chunk_start(size_t chunk) { return chunk == 0 ? 0 : kFirstChunk << (chunk - 1); }
  static size_t chunk_slots(size_t chunk) { return chunk == 0 ? kFirstChunk : chunk_start(chunk); }

  size_t slot(size_t unit) const { return bounded_ ? unit % kBoundedSlots : unit; }
  size_t words_per_slot() const { return bounded_ ? 2 : 1; }
  // The words of slot `at` in `chunk`, chunk number `c`, which holds it.
  template <class Word>
  Word* words_of(Word* chunk, size_t at, size_t c) const {
    return chunk + words_per_slot() * (at - chunk_start(c));
  }
  // The words of `unit`'s slot, or null where its chunk was never
  // allocated. REQUIRES: unit < kMaxUnits.
  const std::atomic<uint64_t>* find(size_t unit) const {
    const size_t at = slot(unit);
    const size_t c = chunk_of(at);
    const std::atomic<uint64_t>* chunk = chunks_[c].load(std::memory_order_acquire);
    return chunk ? words_of(chunk, at, c) : nullptr;
  }

  const bool bounded_;
  // (Slots below kMaxUnits: chunk_of(kMaxUnits - 1) is the last.)
  std::array<std::atomic<std::atomic<uint64_t>*>, std::bit_width(kMaxUnits / kFirstChunk - 1) + 1> chunks_{};
  std::atomic<size_t> end_{0};  // past the highest unit ever set since the last forget_from
};

}  // namespace pagefile
