// Fault injection at every disk operation of local Pagefiles, and so of the
// page servers, which keep their shares in them (LevelDB's fault-injection
// Env, SQLite's test_vfs): a test arms a fault for the Nth read, write,
// sync or truncate from now on, runs a workload, and sees what the layers
// above make of it. Always compiled in; unarmed it costs one relaxed
// atomic load per operation.
//
//   kEio, kEnospc   the operation fails with that errno, and nothing of a
//                   write reaches the file;
//   kShortWrite     the write system call takes only the first half (the
//                   caller writes the rest, as it must with any short write);
//   kTornWrite      the whole 512-byte sectors of the write's first half
//                   reach the file, then EIO: what a crash in the middle of
//                   a write leaves, reported. (A disk writes a sector whole
//                   or not at all, so a write within one sector, such as a
//                   page's checksum entry, tears into nothing.)
// The Nth operation of its kind counts every local Pagefile of the process.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace pagefile {

enum class DiskOp { kRead, kWrite, kSync, kTruncate };
// The smallest sector a disk has: the unit a torn write keeps.
inline constexpr size_t kTornWriteSector = 512;
enum class DiskFault { kEio, kEnospc, kShortWrite, kTornWrite };

class DiskFaults {
 public:
  // From now on, the `nth` (1-based) operation of kind `op` gets `fault`;
  // with `sticky`, every one after it too (a disk that stays full).
  static void arm(DiskOp op, uint64_t nth, DiskFault fault, bool sticky = false);
  // No faults from now on.
  static void disarm();
  // Whether the armed fault has been applied since arm().
  static bool fired();
  // How many operations of the armed kind were asked about since arm(): a
  // test that arms a fault for an `nth` never reached counts the reads a
  // workload makes, say.
  static uint64_t seen();

  // The seam: the store asks before each operation of kind `op`.
  static std::optional<DiskFault> next(DiskOp op);
};

}  // namespace pagefile
