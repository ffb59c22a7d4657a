// One page server per directory, as LevelDB keeps one DB object per
// directory with its LOCK file.
//
// A server's catalog keeps its locks and leases in memory, and its cache
// holds pages it has written; a second server on the same directory (a
// second process on the same embedded PAGEFILE_HOME, or pagefiled started
// twice over one --dir) would grant the same SQLite lock twice and serve
// stale pages. So a server holds an open-file-description write lock on
// DIR/LOCK for as long as it runs; the kernel drops it when the process
// dies, however it dies, so there is nothing to clean up after a crash.
// (A child forked without exec shares the lock until it exits too.)
#pragma once

#include <filesystem>
#include <memory>

#include "pagefile/status.h"

namespace pagefile::net {

class DirLock {
 public:
  // Locks `dir` (which must exist). kBusy, naming the holder's pid, when
  // another server (in this process or another) holds it.
  static Result<std::unique_ptr<DirLock>> acquire(const std::filesystem::path& dir);
  ~DirLock();  // releases the lock
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace pagefile::net
