#include "server/server_pool.h"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/mutex.h"
#include "policies/recency_list.h"

namespace pagefile::net {

namespace {

// global-sequential on a server: keep what was fetched ahead until it is
// read, let go of a page once read. Among pages that may go (read ones a
// client pinned, say) the least recently used goes first.
class GlobalSequentialPolicy final : public PagePolicy {
 public:
  uint32_t wanted_pages(const PolicyLimits& limits) const override { return limits.max_pages; }
  void admitted(int64_t page, bool prefetched) override {
    if (prefetched) unread_.insert(page);
    recency_.touch(page);
  }
  void referenced(int64_t page) override {
    unread_.erase(page);
    recency_.touch(page);
  }
  void removed(int64_t page) override {
    unread_.erase(page);
    recency_.erase(page);
  }
  std::optional<int64_t> victim(const std::function<bool(int64_t)>& evictable) override {
    return recency_.oldest(evictable);
  }
  std::vector<int64_t> passed(int64_t page) override { return {page}; }
  bool pinned(int64_t page) const override { return unread_.contains(page); }

 private:
  std::set<int64_t> unread_;
  RecencyList recency_;
};

constexpr std::string_view kDefaultPolicy = "random";

}  // namespace

ServerPool::ServerPool(uint64_t capacity, uint32_t prefetch_pages)
    : capacity_(std::min<uint64_t>(capacity, std::numeric_limits<uint32_t>::max())),
      prefetch_pages_(prefetch_pages),
      policies_(PolicyRegistry::with_builtins()),
      pool_(capacity_ > 0 ? std::make_unique<BufferPool>(static_cast<uint32_t>(capacity_)) : nullptr) {}

Result<std::string> ServerPool::declare(uint64_t file, uint32_t page_size, std::string_view policy, bool sized) {
  if (!pool_) return std::string(policy);
  MutexLock lock(mu_);
  auto it = files_.find(file);
  if (it != files_.end() && it->second.page_size != page_size && !sized) {
    return Status::invalid_argument(fmt::format("file {}", file), fmt::format("has page size {}, request says {}",
                                                                           it->second.page_size, page_size));
  }
  if (it != files_.end() && it->second.page_size == page_size && (policy.empty() || it->second.policy == policy)) {
    return it->second.policy;
  }
  std::string name(policy.empty() ? kDefaultPolicy : policy);
  PolicyLimits limits{.min_pages = 0, .max_pages = 0, .read_ahead = prefetch_pages_};
  std::unique_ptr<PagePolicy> made;
  if (name == kGlobalSequential) {
    made = std::make_unique<GlobalSequentialPolicy>();
  } else if (auto r = policies_->make(name, limits); r) {
    made = std::move(*r);
  } else {
    name = kDefaultPolicy;  // a client's custom policy: LRU here
    made = std::move(*policies_->make(name, limits));
  }
  if (it != files_.end()) pool_->remove_file(file);
  pool_->add_file(file, page_size, limits, std::move(made));
  files_[file] = PooledFile{name, page_size};
  return name;
}

std::string ServerPool::policy_of(uint64_t file) const {
  MutexLock lock(mu_);
  auto it = files_.find(file);
  return it == files_.end() ? std::string() : it->second.policy;
}

void ServerPool::drop(uint64_t file, int64_t from) {
  if (!pool_) return;
  if (from > 0) {
    pool_->truncate(file, from);
    return;
  }
  MutexLock lock(mu_);
  pool_->remove_file(file);
  files_.erase(file);
}

uint32_t ServerPool::pages_of(uint64_t file) const { return pool_ ? pool_->counters(file).pages : 0; }

uint64_t ServerPool::size() const { return pool_ ? pool_->size() : 0; }

std::vector<FilePoolStats> ServerPool::stats() const {
  std::vector<FilePoolStats> out;
  if (!pool_) return out;
  MutexLock lock(mu_);
  for (const auto& [file, pooled] : files_) out.push_back({file, pooled.policy, pool_->counters(file)});
  return out;
}

}  // namespace pagefile::net
