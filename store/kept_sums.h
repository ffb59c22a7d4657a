// A Pagefile's checksums in memory (store/local_pagefile.h): what it last
// wrote, verified or read from a checksum block for each unit (page or
// sector) of its file, so that reading a page back needs no read of its
// checksum entry, and no lock.
//
// Read and written without a lock, as every page read and write does: the
// values sit in chunks allocated on first use and never moved. Whole-page
// consistency is the caller's (a page's units are set and read under that
// page's lock).
//
// Thread-safety: get() and set() from many threads at once; forget_from()
// ordered against them by the caller (a truncate).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace pagefile {

class KeptSums {
 public:
  // Units past this are not kept (8 bytes each: at most 32 MiB).
  static constexpr size_t kMaxUnits = size_t{1} << 22;

  KeptSums() = default;
  ~KeptSums() {
    for (auto& chunk : chunks_) delete[] chunk.load();
  }
  KeptSums(const KeptSums&) = delete;
  KeptSums& operator=(const KeptSums&) = delete;

  // The value kept for `unit`; 0 when none.
  uint64_t get(size_t unit) const {
    if (unit >= kMaxUnits) return 0;
    const std::atomic<uint64_t>* chunk = chunks_[unit / kChunk].load(std::memory_order_acquire);
    return chunk ? chunk[unit % kChunk].load(std::memory_order_relaxed) : 0;
  }

  // Keeps `value` for `unit` (0: forgets it); past kMaxUnits, nothing.
  void set(size_t unit, uint64_t value) {
    if (unit >= kMaxUnits) return;
    std::atomic<uint64_t>* chunk = chunks_[unit / kChunk].load(std::memory_order_acquire);
    if (chunk == nullptr) {
      if (value == 0) return;
      auto fresh = std::make_unique<std::atomic<uint64_t>[]>(kChunk);  // (zeros)
      if (chunks_[unit / kChunk].compare_exchange_strong(chunk, fresh.get(), std::memory_order_acq_rel)) {
        chunk = fresh.release();
      }  // else `chunk` is the one another thread put there first
    }
    chunk[unit % kChunk].store(value, std::memory_order_relaxed);
    size_t end = end_.load(std::memory_order_relaxed);
    while (unit >= end && !end_.compare_exchange_weak(end, unit + 1, std::memory_order_relaxed)) {
    }
  }

  // Forgets every value from `unit` on.
  void forget_from(size_t unit) {
    size_t end = end_.load();
    for (size_t u = unit; u < end && u < kMaxUnits; ++u) {
      if (auto* chunk = chunks_[u / kChunk].load(std::memory_order_acquire)) {
        chunk[u % kChunk].store(0, std::memory_order_relaxed);
      } else {
        u = (u / kChunk + 1) * kChunk - 1;  // (a chunk never allocated holds nothing)
      }
    }
    if (unit < end) end_ = unit;
  }

 private:
  // (32 KiB, allocated and zeroed at a chunk's first use: every open
  // journal of a SQLite process has one.)
  static constexpr size_t kChunk = size_t{1} << 12;
  std::array<std::atomic<std::atomic<uint64_t>*>, kMaxUnits / kChunk> chunks_{};
  std::atomic<size_t> end_{0};  // past the highest unit ever set since the last forget_from
};

}  // namespace pagefile
