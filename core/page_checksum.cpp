#include "core/page_checksum.h"

#include <algorithm>

#include <fmt/format.h>
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h>  // XXH3_64bits_withSeed becomes its dispatching twin
#endif

namespace pagefile {

uint64_t xxh3(std::span<const std::byte> bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

uint64_t page_checksum(std::span<const std::byte> bytes, int64_t page) {
  uint64_t sum = xxh3(bytes, static_cast<uint64_t>(page));
  return sum == kNoChecksum ? 1 : sum;
}

bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

Status checksum_mismatch(std::string_view what, int64_t page, std::string_view where) {
  return Status::corruption(what, fmt::format("page {} fails its checksum {} (its bytes were damaged)", page, where));
}

}  // namespace pagefile
