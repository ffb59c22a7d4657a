// The checks every page access passes before it reaches a disk or a wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pagefile/status.h"

namespace pagefile {

// OK when `page` lies in [0, kMaxPageNumber]; else kInvalidArgument naming
// `what` (the file) and the page.
Status check_page_number(int64_t page, std::string_view what);

// OK when `pages` is a size a file may have: [0, kMaxPageNumber + 1], so
// that no size times a page size overflows; else kInvalidArgument naming
// `what`. Every size that enters (a request, a catalog record) passes it.
Status check_size_pages(int64_t pages, std::string_view what);

// check_page_number, and that the buffer holds exactly one page.
Status check_page_access(int64_t page, size_t buffer_size, uint32_t page_size,
                         std::string_view what);

}  // namespace pagefile
