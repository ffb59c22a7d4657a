#include "core/page_bounds.h"

#include <fmt/format.h>

#include "pagefile/pagefile.h"

namespace pagefile {

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

Status check_size_pages(int64_t pages, std::string_view what) {
  if (pages < 0) {
    return Status::invalid_argument(what, fmt::format("size of {} pages is negative", pages));
  }
  if (pages > kMaxPageNumber + 1) {
    return Status::invalid_argument(
        what, fmt::format("size of {} pages is beyond the largest size, {} pages", pages, kMaxPageNumber + 1));
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
