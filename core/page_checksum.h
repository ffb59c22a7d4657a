// Page checksums, end to end (doc/page_format.md, doc/wire_protocol.md).
//
// The writer of a page computes its checksum once; the checksum travels with
// the page over the wire, is checked by the server on arrival, stored beside
// the page on disk, checked when the page is read from disk, and checked
// again by the client on every page it receives. A page whose bytes do not
// match is kCorruption, never data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "pagefile/status.h"

namespace pagefile {

// 0 is never a page's checksum: stored, it means "none recorded" (a page
// never written, which reads as zeros).
inline constexpr uint64_t kNoChecksum = 0;

// XXH3-64 of `bytes` with `seed`, by the fastest code this CPU runs
// (libxxhash's x86 dispatch picks AVX2 or AVX-512 when present: about four
// times SSE2's speed). The value is the same on every CPU.
uint64_t xxh3(std::span<const std::byte> bytes, uint64_t seed);

// XXH3-64 of the page's bytes, seeded with its page number so that a page
// written or read at the wrong place fails too. Never kNoChecksum.
uint64_t page_checksum(std::span<const std::byte> bytes, int64_t page);

// Whether every byte is zero (a page never written).
bool all_zero(std::span<const std::byte> bytes);

// The kCorruption of page `page` of `what` that does not match its
// checksum, saying where it was found (`where`: "on disk at server X",
// "from server X", "on arrival at server X").
Status checksum_mismatch(std::string_view what, int64_t page, std::string_view where);

}  // namespace pagefile
