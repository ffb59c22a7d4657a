// The built-in policies: random (LRU), sequential (read-ahead, toss),
// looping (MRU) and, on the client, global-sequential (as random). Their
// rules and a worked example are in pagefile/policy.h.
#include <algorithm>

#include "pagefile/options.h"
#include "pagefile/policy.h"
#include "policies/recency_list.h"

namespace pagefile {

namespace {

// Replacement by recency: the least recently used page goes (LRU) or the
// most recently used (MRU). Wants every page it may hold, no read-ahead.
class RecencyPolicy : public PagePolicy {
 public:
  enum class Evict { kLeastRecent, kMostRecent };
  explicit RecencyPolicy(Evict evict) : evict_(evict) {}

  uint32_t wanted_pages(const PolicyLimits& limits) const override { return limits.max_pages; }
  void admitted(int64_t page, bool /*prefetched*/) override { recency_.touch(page); }
  void referenced(int64_t page) override { recency_.touch(page); }
  void removed(int64_t page) override { recency_.erase(page); }
  std::optional<int64_t> victim(const std::function<bool(int64_t)>& evictable) override {
    return evict_ == Evict::kLeastRecent ? recency_.oldest(evictable) : recency_.newest(evictable);
  }

 private:
  const Evict evict_;
  RecencyList recency_;
};

// random: LRU, no read-ahead, the best a policy can do knowing nothing of
// the order.
class RandomPolicy final : public RecencyPolicy {
 public:
  RandomPolicy() : RecencyPolicy(Evict::kLeastRecent) {}
};

// looping: keep it all when it fits; otherwise evict the most recently used,
// which in a loop is the page needed furthest in the future (what Belady's
// optimal policy would evict too).
class LoopingPolicy final : public RecencyPolicy {
 public:
  LoopingPolicy() : RecencyPolicy(Evict::kMostRecent) {}
};

// sequential: fetch the next read_ahead pages so their latencies overlap,
// and drop each page once used, so the file holds no more than its window.
// Should a page stay (pinned, or tossing raced a prefetch), the most
// recently used goes first: in a scan it is the one needed last.
class SequentialPolicy final : public RecencyPolicy {
 public:
  SequentialPolicy() : RecencyPolicy(Evict::kMostRecent) {}

  uint32_t wanted_pages(const PolicyLimits& limits) const override {
    return std::max<uint32_t>(limits.read_ahead, 1);
  }
  std::vector<int64_t> passed(int64_t page) override { return {page}; }
  std::vector<int64_t> read_ahead(int64_t page, const PolicyLimits& limits) override {
    std::vector<int64_t> pages;
    for (uint32_t i = 1; i <= limits.read_ahead; ++i) pages.push_back(page + i);
    return pages;
  }
};

template <class Policy>
PolicyMaker maker() {
  return [](const PolicyLimits&) -> std::unique_ptr<PagePolicy> { return std::make_unique<Policy>(); };
}

}  // namespace

Status register_builtin_policies(PolicyRegistry& registry) {
  if (Status s = registry.add(access_type_name(AccessType::kRandom), maker<RandomPolicy>()); !s) return s;
  if (Status s = registry.add(access_type_name(AccessType::kSequential), maker<SequentialPolicy>()); !s) {
    return s;
  }
  if (Status s = registry.add(access_type_name(AccessType::kLooping), maker<LoopingPolicy>()); !s) return s;
  // global-sequential: a file several clients scan together, each reading
  // its own pages; the servers read ahead for all of them (TOPs 2.2,
  // server/server_pool.h). A client's own read-ahead would fetch the pages of
  // the others, so on the client it is LRU without read-ahead, as random.
  return registry.add("global-sequential", maker<RandomPolicy>());
}

}  // namespace pagefile
