// Pages ordered by their last use, for the policies that replace by recency
// (LRU takes from the old end, MRU from the new end).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <unordered_map>

namespace pagefile {

class RecencyList {
 public:
  // Makes `page` the most recent, adding it when absent.
  void touch(int64_t page) {
    // (Moving the node keeps its iterator valid: a hit costs one lookup and
    // no allocation, which a page server's cache hits feel.)
    auto [it, added] = where_.try_emplace(page);
    if (added) {
      order_.push_back(page);
      it->second = std::prev(order_.end());
    } else {
      order_.splice(order_.end(), order_, it->second);
    }
  }

  void erase(int64_t page) {
    auto it = where_.find(page);
    if (it == where_.end()) return;
    order_.erase(it->second);
    where_.erase(it);
  }

  // The least recently used page that `evictable` accepts.
  std::optional<int64_t> oldest(const std::function<bool(int64_t)>& evictable) const {
    for (int64_t page : order_) {
      if (evictable(page)) return page;
    }
    return std::nullopt;
  }

  // The most recently used page that `evictable` accepts.
  std::optional<int64_t> newest(const std::function<bool(int64_t)>& evictable) const {
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      if (evictable(*it)) return *it;
    }
    return std::nullopt;
  }

 private:
  std::list<int64_t> order_;  // oldest first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> where_;
};

}  // namespace pagefile
