// Frames: how messages cross a connection (doc/wire_protocol.md).
//
// On a byte stream a frame is a 4-byte little-endian length N followed by N
// bytes holding one Cap'n Proto message in its flat-array form. N is a
// multiple of 8 (Cap'n Proto words) and at most kMaxFrameBytes; anything else
// is malformed and closes the connection. In process (inproc:) the same
// frames are handed over in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <capnp/common.h>

namespace pagefile::net {

// Large enough for a run of 64 pages of 64 KiB plus headers.
inline constexpr size_t kMaxFrameBytes = 8u << 20;
inline constexpr size_t kFrameHeaderBytes = 4;

// One message body, word-aligned so Cap'n Proto reads it in place.
using Frame = std::vector<capnp::word>;

}  // namespace pagefile::net
