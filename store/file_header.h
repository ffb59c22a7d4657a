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
// written, unchecked (doc/page_format.md). A new file is version 2 unless
// it has sector checksums, so that a build reading version 2 reads it.
inline constexpr uint32_t kFormatVersion = 3;
inline constexpr uint32_t kPageChecksumFormatVersion = 2;
inline constexpr uint32_t kUncheckedFormatVersion = 1;
// The unit a version 3 file checks: a sector of the disk, which a write
// changes whole or not at all.
inline constexpr uint32_t kChecksumSectorSize = 4096;
inline constexpr std::string_view kHeaderMagic = "PAGEFILE";

struct FileHeader {
  uint32_t version = kPageChecksumFormatVersion;
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
