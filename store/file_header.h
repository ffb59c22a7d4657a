// The header at the start of every local Pagefile (doc/page_format.md).
//
// It records what must never change after creation (the page size) and the
// policy given at creation, and carries a checksum so that a damaged or
// foreign file is refused instead of read as pages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pagefile {

// Pages start after the header. 4 KiB keeps every page aligned to the file
// system block whatever the page size.
inline constexpr size_t kHeaderSize = 4096;
// Version 2 keeps a checksum beside every page; version 3 beside every
// 4 KiB sector of a page, for files created with sector checksums whose
// pages are larger; version 1 files (no checksums) are still read and
// written, unchecked (doc/page_format.md). Versions 4 and 5 are 2 and 3
// with SQLite's lock levels on other bytes of the header, which let a
// reader take SHARED in one call fewer (LocalPagefile::set_lock_level): a
// build that locks the old way reads at most version 3, so no two
// processes that lock differently ever share a file. A new file is version
// 4, or 5 with sector checksums; one that never takes lock levels (a
// journal, a WAL, a server's share) 2 or 3, which older builds read.
inline constexpr uint32_t kUncheckedFormatVersion = 1;
inline constexpr uint32_t kPageChecksumFormatVersion = 2;
inline constexpr uint32_t kSectorChecksumFormatVersion = 3;
inline constexpr uint32_t kAdjacentLocksFormatVersion = 4;
inline constexpr uint32_t kAdjacentLocksSectorFormatVersion = 5;
inline constexpr uint32_t kFormatVersion = kAdjacentLocksSectorFormatVersion;  // the highest this build reads

// What a format version holds.
constexpr bool has_checksum_blocks(uint32_t version) { return version >= kPageChecksumFormatVersion; }
constexpr bool has_sector_checksums(uint32_t version) {
  return version == kSectorChecksumFormatVersion || version == kAdjacentLocksSectorFormatVersion;
}
constexpr bool has_adjacent_locks(uint32_t version) { return version >= kAdjacentLocksFormatVersion; }
// The unit a version 3 or 5 file checks: a sector of the disk, which a write
// changes whole or not at all.
inline constexpr uint32_t kChecksumSectorSize = 4096;
inline constexpr std::string_view kHeaderMagic = "PAGEFILE";

struct FileHeader {
  uint32_t version = kAdjacentLocksFormatVersion;
  uint32_t page_size = kDefaultPageSize;
  BufferPolicy policy;
  int64_t created_unix_ns = 0;
};

// The kHeaderSize bytes that represent `header`.
std::array<std::byte, kHeaderSize> encode_header(const FileHeader& header);

// Parses a header; `what` names the file in errors. kCorruption when the
// magic, checksum, version or a field is wrong.
Result<FileHeader> decode_header(std::span<const std::byte> bytes, std::string_view what);
// decode_header, but for the checksum: for the header of a file that holds
// no page, torn while being rewritten (LocalPagefile::set_empty_page_size),
// whose fields are each whole, old or new.
Result<FileHeader> decode_header_fields(std::span<const std::byte> bytes, std::string_view what);

// Whether `bytes` (a file's first bytes, at most a header) begin with a
// Pagefile header's magic: what tells a damaged Pagefile from another file.
bool has_header_magic(std::span<const std::byte> bytes);

}  // namespace pagefile
