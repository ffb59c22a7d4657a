// A custom policy for the tests: CLOCK, registered by name beside the
// built-ins to show a policy plugs in through the same interface.
#pragma once

#include <algorithm>
#include <vector>

#include "pagefile/policy.h"

namespace pagefile::test {

// CLOCK (second chance): frames in a ring, a use bit set on every use; the
// hand clears set bits and evicts the first page whose bit is clear.
class ClockPolicy final : public PagePolicy {
 public:
  uint32_t wanted_pages(const PolicyLimits& limits) const override { return limits.max_pages; }
  void admitted(int64_t page, bool /*prefetched*/) override {
    auto empty = std::find_if(ring_.begin(), ring_.end(), [](const Slot& s) { return !s.used; });
    if (empty == ring_.end()) {
      ring_.push_back({page, true, true});
    } else {
      *empty = {page, true, true};
    }
  }
  void referenced(int64_t page) override {
    for (Slot& s : ring_) {
      if (s.used && s.page == page) s.bit = true;
    }
  }
  void removed(int64_t page) override {
    for (Slot& s : ring_) {
      if (s.used && s.page == page) s.used = false;
    }
  }
  std::optional<int64_t> victim(const std::function<bool(int64_t)>& evictable) override {
    // Two sweeps clear every bit; a third finding nothing means all pinned.
    for (size_t step = 0; step < 3 * ring_.size(); ++step) {
      Slot& s = ring_[hand_];
      hand_ = (hand_ + 1) % ring_.size();
      if (!s.used || !evictable(s.page)) continue;
      if (!s.bit) return s.page;
      s.bit = false;
    }
    return std::nullopt;
  }

 private:
  struct Slot {
    int64_t page;
    bool used;
    bool bit;
  };
  std::vector<Slot> ring_;
  size_t hand_ = 0;
};

}  // namespace pagefile::test
