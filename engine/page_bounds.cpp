#include "engine/page_bounds.h"

#include <fmt/format.h>

#include "pagefile/options.h"
#include "pagefile/pagefile.h"

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

Status check_page_number(int64_t page, std::string_view what) {
  if (page < 0) {
    return Status::invalid_argument(what, fmt::format("page number {} is negative", page));
  }
  if (page > kMaxPageNumber) {
    return Status::invalid_argument(
        what, fmt::format("page number {} is beyond the largest page {}", page, kMaxPageNumber));
  }
  return Status::ok();
}

Status check_page_access(int64_t page, size_t buffer_size, uint32_t page_size,
                         std::string_view what) {
  if (Status s = check_page_number(page, what); !s) return s;
  if (buffer_size != page_size) {
    return Status::invalid_argument(
        what, fmt::format("buffer of {} bytes for a page of {} bytes", buffer_size, page_size));
  }
  return Status::ok();
}

}  // namespace pagefile
