#include "bus/placement.h"

#include <xxhash.h>

namespace pagefile::net {

PagePlacement::PagePlacement(Placement kind, uint64_t file_id, uint32_t stripe_pages,
                     const std::vector<std::string>& servers)
    : kind_(kind), file_id_(file_id), stripe_pages_(stripe_pages == 0 ? 1 : stripe_pages) {
  seeds_.reserve(servers.size());
  for (const auto& s : servers) seeds_.push_back(XXH64(s.data(), s.size(), 0x52414d41));  // "RAMA"
  unit0_server_ = server_of_unit(0);
}

size_t PagePlacement::server_for(int64_t page) const {
  uint64_t unit = static_cast<uint64_t>(page) / stripe_pages_;
  return unit == 0 ? unit0_server_ : server_of_unit(unit);
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
