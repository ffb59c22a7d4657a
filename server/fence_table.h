// The highest fencing token a page server has seen per file
// (doc/architecture.md, "Fencing"), kept in its directory so that it
// outlives the server: DIR/shares/ID.fence. A writer whose lock passed to
// another client while this server was down is refused when the server is
// back, as it would have been before.
//
// A token is recorded (and, unless the server never flushes, flushed)
// before the request that raised it goes on, so a raise that was answered
// is never forgotten. An empty record (made, then a crash or a full disk
// before its first write) is none: its raise was never answered. Raises happen when a write lock passes to another
// client, not at every write, so the flush is rare.
//
// Thread-safety: thread-safe. Each file has a mutex of its own, held over
// its record's read and flush, so a raise of one file waits for no other.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <unordered_map>

#include "core/mutex.h"
#include "pagefile/status.h"

namespace pagefile::net {

class FenceTable {
 public:
  // `shares`: the directory of the shares (DIR/shares); `flush`: whether a
  // raise is flushed to disk (false for SyncMode::kNone).
  FenceTable(std::filesystem::path shares, bool flush);

  // Raises file `file_id`'s highest token seen to `token` (0: a writer
  // without a lock, nothing to check). kStale, changing nothing, when a
  // higher one was seen; kCorruption when the recorded one is damaged (the
  // file's writes are then refused: what bar to hold them to is unknown).
  Status check(uint64_t file_id, uint64_t token);
  // The file is gone from this server: its record goes too.
  void forget(uint64_t file_id);

 private:
  std::filesystem::path path(uint64_t file_id) const;
  // The recorded token, 0 when there is none.
  Result<uint64_t> load(uint64_t file_id) const;
  Status store(uint64_t file_id, uint64_t token) const;

  struct File {
    Mutex mu;
    bool loaded GUARDED_BY(mu) = false;
    uint64_t highest GUARDED_BY(mu) = 0;  // as loaded or raised
  };
  std::shared_ptr<File> file(uint64_t file_id);

  const std::filesystem::path shares_;
  const bool flush_;
  Mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<File>> files_ GUARDED_BY(mu_);
};

}  // namespace pagefile::net
