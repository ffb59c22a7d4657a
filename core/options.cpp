// Checks and names of the option values in pagefile/options.h.
#include <fmt/format.h>

#include "pagefile/options.h"

namespace pagefile {

Status check_page_size(uint32_t page_size) {
  bool power_of_two = page_size != 0 && (page_size & (page_size - 1)) == 0;
  if (!power_of_two || page_size < kMinPageSize || page_size > kMaxPageSize) {
    return Status::invalid_argument(
        fmt::format("page size {}", page_size),
        fmt::format("must be a power of two from {} to {}", kMinPageSize, kMaxPageSize));
  }
  return Status::ok();
}

std::string_view location_name(Location location) {
  return location == Location::kLocal ? "local" : "remote";
}

std::string_view placement_name(Placement placement) {
  return placement == Placement::kHash ? "hash" : "stripe";
}

Result<Placement> parse_placement(std::string_view name) {
  if (name == "stripe") return Placement::kStripe;
  if (name == "hash") return Placement::kHash;
  return Status::invalid_argument(fmt::format("placement '{}'", name), "must be stripe or hash");
}

Status check_replicas(uint32_t replicas, size_t servers) {
  if (replicas < 1 || replicas > kMaxReplicas) {
    return Status::invalid_argument(fmt::format("replicas={}", replicas),
                                    fmt::format("must be 1 to {}", kMaxReplicas));
  }
  if (replicas > servers) {
    return Status::invalid_argument(
        fmt::format("replicas={}", replicas),
        fmt::format("needs {} servers, each copy on its own; the file has {}", replicas, servers));
  }
  return Status::ok();
}

Result<bool> parse_on_off(std::string_view what, std::string_view text) {
  if (text == "on" || text == "true" || text == "1") return true;
  if (text == "off" || text == "false" || text == "0") return false;
  return Status::invalid_argument(what, fmt::format("'{}' is neither on nor off", text));
}

}  // namespace pagefile
