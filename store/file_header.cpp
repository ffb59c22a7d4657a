#include "store/file_header.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/little_endian.h"

namespace pagefile {

namespace {

// Field offsets; the checksum covers every byte before it.
constexpr size_t kMagicAt = 0;
constexpr size_t kVersionAt = 8;
constexpr size_t kPageSizeAt = 12;
constexpr size_t kAccessAt = 16;
constexpr size_t kMinPagesAt = 20;
constexpr size_t kMaxPagesAt = 24;
constexpr size_t kHeaderSizeAt = 28;
constexpr size_t kCreatedAt = 32;
// The policy's registered name when it is not the built-in of the access
// type: a length byte, then the name. Zero in files written before names.
constexpr size_t kPolicyNameAt = 40;
constexpr size_t kChecksumAt = kHeaderSize - 8;


uint64_t checksum(std::span<const std::byte> bytes) {
  return XXH64(bytes.data(), kChecksumAt, /*seed=*/0x5061676546696c65ULL);
}

}  // namespace

std::array<std::byte, kHeaderSize> encode_header(const FileHeader& header) {
  std::array<std::byte, kHeaderSize> out{};
  std::memcpy(out.data() + kMagicAt, kHeaderMagic.data(), kHeaderMagic.size());
  put_le<uint32_t>(out, kVersionAt, kFormatVersion);
  put_le<uint32_t>(out, kPageSizeAt, header.page_size);
  put_le<uint8_t>(out, kAccessAt, static_cast<uint8_t>(header.policy.access));
  put_le<uint32_t>(out, kMinPagesAt, header.policy.min_pages);
  put_le<uint32_t>(out, kMaxPagesAt, header.policy.max_pages);
  put_le<uint32_t>(out, kHeaderSizeAt, static_cast<uint32_t>(kHeaderSize));
  put_le<int64_t>(out, kCreatedAt, header.created_unix_ns);
  if (policy_name(header.policy) != access_type_name(header.policy.access)) {
    std::string_view name = std::string_view(header.policy.name).substr(0, kMaxPolicyNameLength);
    put_le<uint8_t>(out, kPolicyNameAt, static_cast<uint8_t>(name.size()));
    std::memcpy(out.data() + kPolicyNameAt + 1, name.data(), name.size());
  }
  put_le<uint64_t>(out, kChecksumAt, checksum(out));
  return out;
}

Result<FileHeader> decode_header(std::span<const std::byte> bytes, std::string_view what) {
  if (bytes.size() < kHeaderSize) {
    return Status::corruption(
        what, fmt::format("header is {} bytes, a Pagefile header has {}", bytes.size(), kHeaderSize));
  }
  if (std::memcmp(bytes.data() + kMagicAt, kHeaderMagic.data(), kHeaderMagic.size()) != 0) {
    return Status::corruption(what, "not a Pagefile (bad magic in header)");
  }
  if (get_le<uint64_t>(bytes, kChecksumAt) != checksum(bytes)) {
    return Status::corruption(what, "header checksum mismatch (header damaged)");
  }
  uint32_t version = get_le<uint32_t>(bytes, kVersionAt);
  if (version != kFormatVersion) {
    return Status::corruption(
        what, fmt::format("header format version {} (this build reads {})", version, kFormatVersion));
  }
  if (get_le<uint32_t>(bytes, kHeaderSizeAt) != kHeaderSize) {
    return Status::corruption(what, "header size field is wrong");
  }
  FileHeader header;
  header.page_size = get_le<uint32_t>(bytes, kPageSizeAt);
  if (Status s = check_page_size(header.page_size); !s) {
    return Status::corruption(what, fmt::format("recorded {}", s.message()));
  }
  uint8_t access = get_le<uint8_t>(bytes, kAccessAt);
  if (access > static_cast<uint8_t>(AccessType::kLooping)) {
    return Status::corruption(what, fmt::format("unknown access type {} in header", access));
  }
  header.policy.access = static_cast<AccessType>(access);
  header.policy.min_pages = get_le<uint32_t>(bytes, kMinPagesAt);
  header.policy.max_pages = get_le<uint32_t>(bytes, kMaxPagesAt);
  header.created_unix_ns = get_le<int64_t>(bytes, kCreatedAt);
  if (uint8_t length = get_le<uint8_t>(bytes, kPolicyNameAt); length != 0) {
    std::string name(reinterpret_cast<const char*>(bytes.data()) + kPolicyNameAt + 1,
                     std::min<size_t>(length, kMaxPolicyNameLength));
    if (length > kMaxPolicyNameLength || !check_policy_name(name)) {
      return Status::corruption(what, "bad policy name in header");
    }
    header.policy.name = std::move(name);
  }
  return header;
}

}  // namespace pagefile
