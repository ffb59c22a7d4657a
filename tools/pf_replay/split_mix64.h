// SplitMix64, the generator of pf-replay's traces and of its pages' filler:
// tiny, fast, and its output is fixed by its seed on every platform, which
// the determinism of traces and replays relies on. Draws are made here, not
// with the standard library's distributions, whose results differ between
// implementations.
//
// Thread-safety: a plain value; one generator per thread.
#pragma once

#include <cstdint>
#include <limits>

namespace pf_replay {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits.
  double next_unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, bound) without modulo bias: draws in the top
  // 2^64 mod bound values are rejected, so every remainder is equally
  // likely. REQUIRES: bound > 0.
  uint64_t next_below(uint64_t bound) {
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    const uint64_t excess = (kMax % bound + 1) % bound;  // 2^64 mod bound
    for (;;) {
      const uint64_t draw = next();
      if (draw <= kMax - excess) return draw % bound;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace pf_replay
