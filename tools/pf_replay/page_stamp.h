// The stamp pf-replay writes into every page, so that any later read of the
// page (in the same run or a later one, at any concurrency) can tell whether
// it got the page it should have: the right file, the right page number, the
// right version, and no byte damaged on the way.
//
// Layout (little-endian, offsets in bytes; doc/trace_format.md is the
// reference):
//
//   0   8  magic      "PFSTAMP2"
//   8   8  checksum   XXH3-64 (seed kStampChecksumSeed) of the page from
//                     offset 16 to its end
//   16  8  page       the page number (int64)
//   24  8  version    the write's version (uint64), unique across runs
//   32  8  name hash  XXH64 (seed 0) of the full file name
//   40  4  name size  the length of the full file name in bytes (uint32)
//   44  4  stored     how many name bytes follow (uint32, <= kStampNameBytes)
//   48 64  name       the first `stored` bytes of the name, zero padded
//   112 .. filler     bytes drawn from a generator seeded with
//                     (name hash, page, version), to the end of the page
//
// The filler makes every byte of the page depend on what the page is, so a
// page torn between two versions, or shifted, fails the checksum; and being
// derived rather than random it makes a replay deterministic: the same trace
// with the same version base writes the same bytes whatever the concurrency.
//
// Thread-safety: free functions on caller-owned buffers; no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pagefile/status.h"

namespace pf_replay {

inline constexpr std::string_view kStampMagic = "PFSTAMP2";
// Pages stamped before XXH3: the same layout, but the checksum is XXH64 of
// the whole page with the checksum's 8 bytes taken as zero. Read, never
// written.
inline constexpr std::string_view kStampMagicV1 = "PFSTAMP1";
inline constexpr uint64_t kStampChecksumSeed = 0x70662d7265706c79ULL;  // "pf-reply"
inline constexpr size_t kStampNameBytes = 64;
// The fixed fields and the stored name; the filler fills the rest.
inline constexpr size_t kStampHeaderSize = 48 + kStampNameBytes;

// The fields of a stamp as read back from a page.
struct PageStamp {
  int64_t page = 0;
  uint64_t version = 0;
  uint64_t name_hash = 0;
  uint32_t name_size = 0;
  std::string stored_name;  // at most kStampNameBytes of the name
};

// XXH64 (seed 0) of a file name, as stored in stamps.
uint64_t stamp_name_hash(std::string_view name);

// Fills `page` with the stamp of (name, page_number, version).
// REQUIRES: page.size() >= kStampHeaderSize (every legal Pagefile page size
// is) and a multiple of 8.
void stamp_page(std::span<std::byte> page, std::string_view name, int64_t page_number,
                uint64_t version);

// Reads the stamp of a page by itself: OK when the magic is there and the
// checksum matches. kCorruption otherwise, saying which check failed.
pagefile::Result<PageStamp> read_stamp(std::span<const std::byte> page);

// Checks that `page` is the stamp of (name, page_number) and, when
// `expected_version` is given, of that version. OK when it is; else
// kCorruption whose message says what differs ("version 12 instead of 14",
// "page number 7 instead of 9", "bad checksum", ...).
pagefile::Status verify_stamp(std::span<const std::byte> page, std::string_view name,
                              int64_t page_number, std::optional<uint64_t> expected_version);

// Whether every byte of `page` is zero: what a page never written reads as.
bool is_zero_page(std::span<const std::byte> page);

}  // namespace pf_replay
