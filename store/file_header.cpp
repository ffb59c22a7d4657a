#include "store/file_header.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/little_endian.h"
#include "core/sqlite_header.h"

namespace pagefile {

namespace {

// The fields at their offsets (doc/page_format.md); the checksum covers
// every byte before it.
constexpr size_t kMagicAt = 0;
constexpr LeField<uint32_t> kVersion{8};
constexpr LeField<uint32_t> kPageSize{12};
constexpr LeField<uint8_t> kAccess{16};
constexpr LeField<uint32_t> kMinPages{20};
constexpr LeField<uint32_t> kMaxPages{24};
constexpr LeField<uint32_t> kHeaderSizeField{28};
constexpr LeField<int64_t> kCreated{32};
// The policy's registered name when it is not the built-in of the access
// type: a length byte, then the name. Zero in files written before names.
constexpr LeField<uint8_t> kPolicyNameLength{40};
constexpr size_t kPolicyNameAt = kPolicyNameLength.end();
constexpr LeField<uint64_t> kChecksum{kHeaderSize - 8};

uint64_t checksum(std::span<const std::byte> bytes) {
  return XXH64(bytes.data(), kChecksum.at, /*seed=*/0x5061676546696c65ULL);
}

}  // namespace

std::array<std::byte, kHeaderSize> encode_header(const FileHeader& header) {
  std::array<std::byte, kHeaderSize> out{};
  std::memcpy(out.data() + kMagicAt, kHeaderMagic.data(), kHeaderMagic.size());
  kVersion.put(out, header.version);
  kPageSize.put(out, header.page_size);
  kAccess.put(out, static_cast<uint8_t>(header.policy.access));
  kMinPages.put(out, header.policy.min_pages);
  kMaxPages.put(out, header.policy.max_pages);
  kHeaderSizeField.put(out, static_cast<uint32_t>(kHeaderSize));
  kCreated.put(out, header.created_unix_ns);
  if (policy_name(header.policy) != access_type_name(header.policy.access)) {
    std::string_view name = std::string_view(header.policy.name).substr(0, kMaxPolicyNameLength);
    kPolicyNameLength.put(out, static_cast<uint8_t>(name.size()));
    std::memcpy(out.data() + kPolicyNameAt, name.data(), name.size());
  }
  kChecksum.put(out, checksum(out));
  return out;
}

bool has_header_magic(std::span<const std::byte> bytes) {
  return bytes.size() >= kMagicAt + kHeaderMagic.size() &&
         std::memcmp(bytes.data() + kMagicAt, kHeaderMagic.data(), kHeaderMagic.size()) == 0;
}

namespace {

Result<FileHeader> decode(std::span<const std::byte> bytes, std::string_view what, bool verify_checksum) {
  if (bytes.size() < kHeaderSize) {
    return Status::corruption(
        what, fmt::format("header is {} bytes, a Pagefile header has {}", bytes.size(), kHeaderSize));
  }
  if (!has_header_magic(bytes)) {
    if (has_sqlite_magic(bytes)) {
      return Status::corruption(what, "is an ordinary SQLite database, not a Pagefile; it is left as it is. Copy it "
                                      "into a Pagefile with SQLite's backup (in the sqlite3 shell with pagefile "
                                      "loaded: .backup 'file:NEW.db?vfs=pagefile&location=local'), or into a "
                                      "cluster with `pagefile import`");
    }
    return Status::corruption(what, "not a Pagefile (bad magic in header)");
  }
  if (verify_checksum && kChecksum.get(bytes) != checksum(bytes)) {
    return Status::corruption(what, "header checksum mismatch (header damaged)");
  }
  uint32_t version = kVersion.get(bytes);
  if (version < kUncheckedFormatVersion || version > kFormatVersion) {
    // A newer build's file is whole, only not this build's to read: no
    // damage (SQLite's "unable to open", not "malformed").
    auto make = version > kFormatVersion ? Status::not_supported : Status::corruption;
    return make(what, fmt::format("header format version {} (this build reads {} to {}{})", version,
                                  kUncheckedFormatVersion, kFormatVersion,
                                  version > kFormatVersion ? "; a newer build made it: open it with that build" : ""));
  }
  if (kHeaderSizeField.get(bytes) != kHeaderSize) {
    return Status::corruption(what, "header size field is wrong");
  }
  FileHeader header;
  header.version = version;
  header.page_size = kPageSize.get(bytes);
  if (Status s = check_page_size(header.page_size); !s) {
    return Status::corruption(what, fmt::format("recorded {}", s.message()));
  }
  if (has_sector_checksums(version) && header.page_size <= kChecksumSectorSize) {
    // (Sector checksums of a page no larger than a sector are its page
    // checksum: such a file is made as version 4.)
    return Status::corruption(what, fmt::format("format version {} with page size {}", version, header.page_size));
  }
  uint8_t access = kAccess.get(bytes);
  if (access > static_cast<uint8_t>(AccessType::kLooping)) {
    return Status::corruption(what, fmt::format("unknown access type {} in header", access));
  }
  header.policy.access = static_cast<AccessType>(access);
  header.policy.min_pages = kMinPages.get(bytes);
  header.policy.max_pages = kMaxPages.get(bytes);
  header.created_unix_ns = kCreated.get(bytes);
  if (uint8_t length = kPolicyNameLength.get(bytes); length != 0) {
    std::string name(reinterpret_cast<const char*>(bytes.data()) + kPolicyNameAt,
                     std::min<size_t>(length, kMaxPolicyNameLength));
    if (length > kMaxPolicyNameLength || !check_policy_name(name)) {
      return Status::corruption(what, "bad policy name in header");
    }
    header.policy.name = std::move(name);
  }
  return header;
}

}  // namespace

Result<FileHeader> decode_header(std::span<const std::byte> bytes, std::string_view what) {
  return decode(bytes, what, /*verify_checksum=*/true);
}

Result<FileHeader> decode_header_fields(std::span<const std::byte> bytes, std::string_view what) {
  return decode(bytes, what, /*verify_checksum=*/false);
}

}  // namespace pagefile
