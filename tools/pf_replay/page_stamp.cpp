#include "tools/pf_replay/page_stamp.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

// The state struct lives on the stack: checksumming a page must not allocate.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "core/little_endian.h"
#include "core/page_checksum.h"
#include "tools/common/printable.h"
#include "tools/pf_replay/split_mix64.h"

namespace pf_replay {

namespace {

using pagefile::LeField;
using pagefile::put_le;
using pagefile::tools::printable;

// page_stamp.h's layout: the fields are packed, each where the one before
// it ends.
constexpr size_t kMagicAt = 0;
constexpr LeField<uint64_t> kChecksum{kMagicAt + kStampMagic.size()};
constexpr LeField<int64_t> kPage{kChecksum.end()};
constexpr LeField<uint64_t> kVersion{kPage.end()};
constexpr LeField<uint64_t> kNameHash{kVersion.end()};
constexpr LeField<uint32_t> kNameSize{kNameHash.end()};
constexpr LeField<uint32_t> kStored{kNameSize.end()};
constexpr size_t kNameAt = kStored.end();
static_assert(kNameAt + kStampNameBytes == kStampHeaderSize);

// The first layout's checksum: XXH64 of the page with the checksum taken
// as zero. Still read, so pages stamped by earlier runs still check.
uint64_t page_checksum_v1(std::span<const std::byte> page) {
  static constexpr std::array<std::byte, 8> kZeros{};
  XXH64_state_t state;
  XXH64_reset(&state, kStampChecksumSeed);
  XXH64_update(&state, page.data(), kChecksum.at);
  XXH64_update(&state, kZeros.data(), kZeros.size());
  XXH64_update(&state, page.data() + kChecksum.end(), page.size() - kChecksum.end());
  return XXH64_digest(&state);
}

// The layout written now: XXH3-64 of everything after the checksum (the
// magic before it is compared as it is). XXH3 takes a third of XXH64's
// time on a page (a quarter of that with AVX2), and a replay checks every
// page it reads.
uint64_t page_checksum(std::span<const std::byte> page) {
  return pagefile::xxh3(page.subspan(kChecksum.end()), kStampChecksumSeed);
}

void fill_filler(std::span<std::byte> page, uint64_t name_hash, int64_t page_number,
                 uint64_t version) {
  std::array<std::byte, 24> key{};
  put_le<uint64_t>(key, 0, name_hash);
  put_le<int64_t>(key, 8, page_number);
  put_le<uint64_t>(key, 16, version);
  SplitMix64 random(XXH64(key.data(), key.size(), /*seed=*/0));
  size_t at = kStampHeaderSize;
  for (; at + 8 <= page.size(); at += 8) put_le<uint64_t>(page, at, random.next());
  uint64_t last = random.next();
  for (; at < page.size(); ++at, last >>= 8) page[at] = static_cast<std::byte>(last & 0xff);
}

}  // namespace

uint64_t stamp_name_hash(std::string_view name) {
  return XXH64(name.data(), name.size(), /*seed=*/0);
}

void stamp_page(std::span<std::byte> page, std::string_view name, int64_t page_number,
                uint64_t version) {
  const uint64_t name_hash = stamp_name_hash(name);
  const size_t stored = std::min(name.size(), kStampNameBytes);
  std::memcpy(page.data() + kMagicAt, kStampMagic.data(), kStampMagic.size());
  kChecksum.put(page, 0);
  kPage.put(page, page_number);
  kVersion.put(page, version);
  kNameHash.put(page, name_hash);
  kNameSize.put(page, static_cast<uint32_t>(name.size()));
  kStored.put(page, static_cast<uint32_t>(stored));
  std::memset(page.data() + kNameAt, 0, kStampNameBytes);
  std::memcpy(page.data() + kNameAt, name.data(), stored);
  fill_filler(page, name_hash, page_number, version);
  kChecksum.put(page, page_checksum(page));
}

pagefile::Result<PageStamp> read_stamp(std::span<const std::byte> page) {
  if (page.size() < kStampHeaderSize) {
    return pagefile::Status::corruption(
        "", fmt::format("page of {} bytes is too small to hold one", page.size()));
  }
  const std::string_view magic(reinterpret_cast<const char*>(page.data() + kMagicAt), kStampMagic.size());
  if (magic != kStampMagic && magic != kStampMagicV1) {
    return pagefile::Status::corruption("", "bad magic (not a page pf-replay wrote)");
  }
  const uint64_t stored_sum = kChecksum.get(page);
  const uint64_t computed_sum = magic == kStampMagic ? page_checksum(page) : page_checksum_v1(page);
  if (stored_sum != computed_sum) {
    return pagefile::Status::corruption(
        "", fmt::format("bad checksum (stored {:016x}, computed {:016x})", stored_sum,
                        computed_sum));
  }
  PageStamp stamp;
  stamp.page = kPage.get(page);
  stamp.version = kVersion.get(page);
  stamp.name_hash = kNameHash.get(page);
  stamp.name_size = kNameSize.get(page);
  // The checksum passed, so a stored count above the field's size means a
  // writer of another layout, not damage.
  const uint32_t stored = kStored.get(page);
  if (stored > kStampNameBytes) {
    return pagefile::Status::corruption(
        "", fmt::format("stored name length {} exceeds {}", stored, kStampNameBytes));
  }
  stamp.stored_name.assign(reinterpret_cast<const char*>(page.data() + kNameAt), stored);
  return stamp;
}

pagefile::Status verify_stamp(std::span<const std::byte> page, std::string_view name,
                              int64_t page_number, std::optional<uint64_t> expected_version) {
  pagefile::Result<PageStamp> stamp = read_stamp(page);
  if (!stamp) return stamp.status();
  const std::string_view stored_prefix = name.substr(0, std::min(name.size(), kStampNameBytes));
  if (stamp->name_hash != stamp_name_hash(name) || stamp->name_size != name.size() ||
      stamp->stored_name != stored_prefix) {
    return pagefile::Status::corruption(
        "", fmt::format("belongs to file '{}'{} instead of '{}'", printable(stamp->stored_name),
                        stamp->name_size > stamp->stored_name.size() ? "..." : "",
                        printable(name)));
  }
  if (stamp->page != page_number) {
    return pagefile::Status::corruption(
        "", fmt::format("page number {} instead of {}", stamp->page, page_number));
  }
  if (expected_version && stamp->version != *expected_version) {
    return pagefile::Status::corruption(
        "", fmt::format("version {} instead of {}{}", stamp->version, *expected_version,
                        stamp->version < *expected_version ? " (an older write)" : ""));
  }
  return pagefile::Status::ok();
}

bool is_zero_page(std::span<const std::byte> page) {
  return std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; });
}

}  // namespace pf_replay
