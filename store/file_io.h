// Reads and writes of a local store file through the disk-fault seam
// (store/disk_faults.h), so that tests make a disk fail or tear a write
// where the store's own code would meet it, and the directory syncs that
// make a new file's name durable. Internal to store/.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "core/mutex.h"
#include "pagefile/status.h"
#include "store/disk_faults.h"

namespace pagefile {

class ReadMapping;

// The errno a fault stands for.
int fault_errno(DiskFault fault);

// pread until `out` is full or the file ends; returns the bytes read.
// With `would_block`, the first call reads only what the page cache holds
// (RWF_NOWAIT) and sets *would_block, reading nothing, when the rest would
// wait for the disk.
// With `map`, bytes it has are copied out of it (ReadMapping::copy), but
// for a read that must not wait (a copy may wait on the disk).
Result<size_t> pread_full(int fd, std::span<std::byte> out, off_t offset, std::string_view what,
                          bool* would_block = nullptr, const ReadMapping* map = nullptr);

// pwrite until all of `data` is written; an error names `what` and the
// offset.
Status pwrite_full(int fd, std::span<const std::byte> data, off_t offset, std::string_view what);

// The directory syncs of this process, by directory: each is numbered when
// it starts, and the highest number of one that completed is kept. A file
// linked into a directory before a sync started is durable, name and all,
// once that sync completes: its own directory sync may be skipped (as a
// new database's is by its journal's, in the same directory: what the unix
// VFS relies on, never syncing a database's directory itself).
class DirSyncs {
 public:
  static DirSyncs& instance() {
    static DirSyncs syncs;
    return syncs;
  }
  uint64_t start(const std::string& dir) {
    MutexLock lock(mu_);
    return ++by_dir_[dir].started;
  }
  void completed(const std::string& dir, uint64_t number) {
    MutexLock lock(mu_);
    auto& d = by_dir_[dir];
    d.completed = std::max(d.completed, number);
  }
  uint64_t started(const std::string& dir) {
    MutexLock lock(mu_);
    return by_dir_[dir].started;
  }
  // Whether a sync that started after `started` has completed.
  bool done_since(const std::string& dir, uint64_t started) {
    MutexLock lock(mu_);
    return by_dir_[dir].completed > started;
  }

 private:
  struct Dir {
    uint64_t started = 0;
    uint64_t completed = 0;
  };
  Mutex mu_;
  std::map<std::string, Dir> by_dir_ GUARDED_BY(mu_);
};

// Directory `dir` as fsync_dir takes it: "." for the empty path (the
// parent of a file named without a directory).
std::string dir_name(const std::filesystem::path& dir);

// `name`: dir_name's.
Status fsync_dir(const std::string& name);

}  // namespace pagefile
