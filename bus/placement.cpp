#include "bus/placement.h"

#include <algorithm>

#include <xxhash.h>

namespace pagefile::net {

PagePlacement::PagePlacement(Placement kind, uint64_t file_id, uint32_t stripe_pages,
                             const std::vector<std::string>& servers, uint32_t replicas)
    : kind_(kind), file_id_(file_id), stripe_pages_(stripe_pages == 0 ? 1 : stripe_pages), replicas_(replicas) {
  seeds_.reserve(servers.size());
  for (const auto& s : servers) seeds_.push_back(XXH64(s.data(), s.size(), 0x52414d41));  // "RAMA"
  unit0_server_ = server_of_unit(0);
}

size_t PagePlacement::server_for(int64_t page) const {
  uint64_t unit = static_cast<uint64_t>(page) / stripe_pages_;
  return unit == 0 ? unit0_server_ : server_of_unit(unit);
}

ReplicaSet PagePlacement::replicas_for(int64_t page) const {
  ReplicaSet set;
  set.count = replicas_;
  uint64_t unit = static_cast<uint64_t>(page) / stripe_pages_;
  if (replicas_ == 1 || kind_ == Placement::kStripe) {
    size_t first = unit == 0 ? unit0_server_ : server_of_unit(unit);
    for (uint32_t k = 0; k < replicas_; ++k) set.index[k] = static_cast<uint32_t>((first + k) % seeds_.size());
    return set;
  }
  // The replicas_ highest scores, highest first (the first is server_for's).
  const uint64_t key[2] = {file_id_, unit};
  std::array<uint64_t, kMaxReplicas> scores{};
  for (size_t i = 0; i < seeds_.size(); ++i) {
    uint64_t score = XXH64(key, sizeof(key), seeds_[i]);
    // Insertion into the kept top list; a tie goes to the lower index, as
    // server_of_unit's does.
    uint32_t kept = std::min<uint32_t>(static_cast<uint32_t>(i), replicas_);  // scores held so far
    uint32_t at = kept;
    while (at > 0 && score > scores[at - 1]) --at;
    if (at >= replicas_) continue;
    for (uint32_t k = std::min(kept, replicas_ - 1); k > at; --k) {
      scores[k] = scores[k - 1];
      set.index[k] = set.index[k - 1];
    }
    scores[at] = score;
    set.index[at] = static_cast<uint32_t>(i);
  }
  return set;
}

size_t PagePlacement::server_of_unit(uint64_t unit) const {
  if (kind_ == Placement::kStripe) return unit % seeds_.size();
  const uint64_t key[2] = {file_id_, unit};
  size_t best = 0;
  uint64_t best_score = 0;
  for (size_t i = 0; i < seeds_.size(); ++i) {
    uint64_t score = XXH64(key, sizeof(key), seeds_[i]);
    if (i == 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

}  // namespace pagefile::net
