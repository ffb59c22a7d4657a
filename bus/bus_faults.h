// Fault injection at the client's end of the bus (store/disk_faults.h's
// counterpart): a test arms a fault for the Nth request frame this process
// sends to a server from now on, and sees what the layers above make of it.
//
//   kDrop    the frame is never sent: its request times out
//            (BusOptions::request_timeout_ms), as over a lossy link;
//   kDelay   the frame goes `delay` late (the sending thread waits);
//   kClose   the connection is closed instead: every request waiting on it
//            fails with kDisconnected, and the next one connects again.
// Frames answered in this process by direct call (the embedded default's
// page work and catalog) send no frame and meet no fault.
//
// Thread-safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace pagefile::net {

enum class BusFault { kDrop, kDelay, kClose };

class BusFaults {
 public:
  // From now on, the `nth` (1-based) frame sent gets `fault`.
  static void arm(uint64_t nth, BusFault fault, std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  static void disarm();
  // Whether the armed fault has been applied since arm().
  static bool fired();
  static std::chrono::milliseconds delay();

  // The seam: the bus asks before it sends each request frame.
  static std::optional<BusFault> next();
};

}  // namespace pagefile::net
